fn main() {
    // sqlx::migrate! embeds the SQL files; rebuild when they change.
    println!("cargo:rerun-if-changed=migrations");
}
