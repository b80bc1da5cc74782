//! Each subcommand: turn arguments into library calls and print the result.

use talker::Result;
use talker::cache::Cache;

use super::args::CacheAction;
use super::common::Global;
use super::common::cache_dir;
use super::ui::{Ui, print_result};

pub fn run_cache(action: &CacheAction, global: &Global, ui: &Ui) -> Result<()> {
    let cache = Cache::open(&cache_dir(global))?;
    match action {
        CacheAction::Stats => {
            let s = cache.stats()?;
            let text = if global.json {
                let mut v = serde_json::to_value(&s).expect("stats serialise");
                v["phrase_hit_ratio"] = s.phrase_hit_ratio().into();
                v["chunk_hit_ratio"] = s.chunk_hit_ratio().into();
                v["dir"] = cache.dir().display().to_string().into();
                v.to_string()
            } else {
                format!(
                    "cache {}\nphrases {:>8}  {:>10} bytes  hit ratio {:.2}\nchunks  {:>8}  {:>10} bytes  hit ratio {:.2}",
                    cache.dir().display(),
                    s.phrases,
                    s.phrase_bytes,
                    s.phrase_hit_ratio(),
                    s.chunks,
                    s.chunk_bytes,
                    s.chunk_hit_ratio()
                )
            };
            print_result(&text, || "the cache statistics".to_owned())?;
        }
        CacheAction::Gc { max_size } => {
            let r = cache.gc(*max_size)?;
            if global.json {
                let text = serde_json::to_string(&r).expect("report serialises");
                print_result(&text, || "the report (the cache is collected)".to_owned())?;
            } else {
                let kept = match r.kept_in_use {
                    0 => String::new(),
                    n => format!(" ({n} entries kept: running renders use them)"),
                };
                ui.say(&format!(
                    "removed {} phrases and {} chunks; {} bytes remain{kept}",
                    r.removed_phrases, r.removed_chunks, r.bytes_after
                ));
            }
        }
    }
    Ok(())
}
