//! The queue's operations: one SQL text for both databases (`{now}` and `{skip_locked}` come from
//! the [`Dialect`](super::Dialect)), each write in one transaction.
//!
//! Input: calls from the CLI and the worker. Output: job and attempt rows.
//! Invariants: every change to a running job names its lease token in the `WHERE` clause and
//! reports whether it still held it; expired leases are reclaimed inside the claim's transaction,
//! so a job is never lost and never claimed twice at once; an attempt row records each claim and
//! whether its render finished, which is how "no job rendered to completion twice" is checked.

use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::Serialize;
use sqlx::AnyConnection;
use sqlx::any::AnyRow;
use sqlx::{AssertSqlSafe, Row};

use super::publish::OutputFile;
use super::spec::Job;
use super::{Queue, QueueError};

/// Outcome of [`Queue::enqueue`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Enqueued {
    pub id: i64,
    /// False when a live job with the same content already existed (and is returned instead).
    pub created: bool,
    pub state: String,
}

/// A job this worker now holds.
#[derive(Debug)]
pub struct Claim {
    pub id: i64,
    pub token: String,
    /// 1 for the first attempt.
    pub attempt: u32,
    pub max_attempts: u32,
    /// The stored job, or why it cannot be read (the worker then fails the job with that).
    pub job: Result<Job, String>,
    /// Expired leases this claim took back from dead workers.
    pub reclaimed: u64,
}

/// What [`Queue::fail`] did with the job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailOutcome {
    /// Queued again, not before this delay.
    Retry(Duration),
    /// Out of attempts: `failed`, error kept.
    Failed,
    /// The lease was no longer ours; nothing changed.
    Lost,
}

/// What [`Queue::cancel`] stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cancelled {
    WasQueued,
    /// Its worker notices at its next heartbeat and stops the render.
    WasRunning,
}

/// One job as `talker status` shows it. Times are unix milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobRow {
    pub id: i64,
    pub state: String,
    pub priority: i64,
    pub attempts: i64,
    pub max_attempts: i64,
    pub source: String,
    pub output: String,
    /// Every file the successful attempt published (output, then subtitles), with its size and
    /// sha256; empty before then.
    pub files: Vec<OutputFile>,
    pub last_error: Option<String>,
    /// The render report of the successful attempt.
    pub result: Option<serde_json::Value>,
    pub lease_owner: Option<String>,
    pub reclaims: i64,
    pub created_at: i64,
    pub run_at: i64,
    pub started_at: Option<i64>,
    pub finished_at: Option<i64>,
}

/// One claim of a job.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Attempt {
    pub attempt: i64,
    pub worker: String,
    pub started_at: i64,
    /// When its render produced a finished video (whether or not it still held the lease).
    pub rendered_at: Option<i64>,
    pub finished_at: Option<i64>,
    /// succeeded, retry, failed, released, expired, cancelled, lost; None while running.
    pub outcome: Option<String>,
    pub error: Option<String>,
}

/// Jobs per state, and leases reclaimed over the queue's life.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub queued: u64,
    pub running: u64,
    pub succeeded: u64,
    pub failed: u64,
    pub cancelled: u64,
    pub lease_reclaims: u64,
}

const JOB_COLUMNS: &str = "id, state, priority, attempts, max_attempts, source, output, last_error, \
     result, lease_owner, reclaims, created_at, run_at, started_at, finished_at";

/// A result's report and the files it records (kept beside the report, in one column).
fn split_result(result: Option<String>) -> (Option<serde_json::Value>, Vec<OutputFile>) {
    let mut report: Option<serde_json::Value> = result.and_then(|s| serde_json::from_str(&s).ok());
    let files = report
        .as_mut()
        .and_then(|v| v.as_object_mut())
        .and_then(|o| o.remove("files"))
        .and_then(|f| serde_json::from_value(f).ok())
        .unwrap_or_default();
    (report, files)
}

fn attempt_row(r: &AnyRow) -> Result<Attempt, sqlx::Error> {
    Ok(Attempt {
        attempt: r.try_get("attempt")?,
        worker: r.try_get("worker")?,
        started_at: r.try_get("started_at")?,
        rendered_at: r.try_get("rendered_at")?,
        finished_at: r.try_get("finished_at")?,
        outcome: r.try_get("outcome")?,
        error: r.try_get("error")?,
    })
}

fn job_row(r: &AnyRow) -> Result<JobRow, sqlx::Error> {
    let (result, files) = split_result(r.try_get("result")?);
    Ok(JobRow {
        id: r.try_get("id")?,
        state: r.try_get("state")?,
        priority: r.try_get("priority")?,
        attempts: r.try_get("attempts")?,
        max_attempts: r.try_get("max_attempts")?,
        source: r.try_get("source")?,
        output: r.try_get("output")?,
        files,
        last_error: r.try_get("last_error")?,
        result,
        lease_owner: r.try_get("lease_owner")?,
        reclaims: r.try_get("reclaims")?,
        created_at: r.try_get("created_at")?,
        run_at: r.try_get("run_at")?,
        started_at: r.try_get("started_at")?,
        finished_at: r.try_get("finished_at")?,
    })
}

/// `AND id IN (…)` for a claim or count limited to some jobs (ids are integers: no injection).
fn id_filter(only: Option<&[i64]>) -> String {
    match only {
        None => String::new(),
        Some(ids) => {
            let list: Vec<String> = ids.iter().map(i64::to_string).collect();
            format!(" AND id IN ({})", list.join(", "))
        }
    }
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// A fresh lease token: 128 bits from SipHash under the OS-random keys of a new `RandomState`
/// (fastrand's seed is only the clock and thread id, too guessable for tokens shared by hosts).
fn new_token() -> String {
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let n = COUNT.fetch_add(1, Ordering::Relaxed);
    let keyed = RandomState::new();
    format!(
        "{:016x}{:016x}",
        keyed.hash_one((n, 0u8)),
        keyed.hash_one((n, 1u8))
    )
}

impl Queue {
    fn sql(&self, template: &str) -> AssertSqlSafe<String> {
        AssertSqlSafe(
            template
                .replace("{now}", self.dialect.now)
                .replace("{skip_locked}", self.dialect.skip_locked),
        )
    }

    fn db_err(&self) -> impl Fn(sqlx::Error) -> QueueError + '_ {
        super::db_error(&self.location)
    }

    /// Runs `work` in one write transaction: committed when it returns `Ok`, rolled back when it
    /// returns an error (the transaction is dropped unfinished).
    fn write<T>(
        &self,
        work: impl AsyncFnOnce(&mut AnyConnection) -> Result<T, QueueError>,
    ) -> Result<T, QueueError> {
        self.rt.block_on(async {
            let mut tx = self
                .pool
                .begin_with(self.dialect.begin)
                .await
                .map_err(self.db_err())?;
            let out = work(&mut tx).await?;
            tx.commit().await.map_err(self.db_err())?;
            Ok(out)
        })
    }

    /// The queued or running job with this content, if any (there is at most one).
    async fn live_job(
        &self,
        tx: &mut AnyConnection,
        content_hash: &str,
    ) -> Result<Option<(i64, String)>, QueueError> {
        sqlx::query_as(
            "SELECT id, state FROM jobs WHERE content_hash = $1 AND state IN ('queued', 'running')",
        )
        .bind(content_hash)
        .fetch_optional(tx)
        .await
        .map_err(self.db_err())
    }

    /// Takes the output's lock for the rest of the transaction (see `Dialect::lock_output`):
    /// what `output_taken` then finds stays true until this transaction commits.
    async fn lock_output(&self, tx: &mut AnyConnection, output: &str) -> Result<(), QueueError> {
        let Some(sql) = self.dialect.lock_output else {
            return Ok(());
        };
        use sha2::Digest;
        let digest = sha2::Sha256::digest(output.as_bytes());
        let key = i64::from_be_bytes(digest[..8].try_into().expect("a sha256 has 32 bytes"));
        sqlx::query(sql)
            .bind(key)
            .execute(tx)
            .await
            .map_err(self.db_err())?;
        Ok(())
    }

    /// The queued or running job that writes `output` with other content than `content_hash`.
    async fn output_taken(
        &self,
        tx: &mut AnyConnection,
        output: &str,
        content_hash: &str,
    ) -> Result<Option<(i64, String, String)>, QueueError> {
        sqlx::query_as(
            "SELECT id, state, source FROM jobs
             WHERE output = $1 AND content_hash <> $2 AND state IN ('queued', 'running')
             ORDER BY id LIMIT 1",
        )
        .bind(output)
        .bind(content_hash)
        .fetch_optional(tx)
        .await
        .map_err(self.db_err())
    }

    /// Adds a job, or returns the live job with the same content (re-enqueue is a no-op). A job
    /// whose output a live job with other content writes is refused: one of the two renders
    /// would silently replace the other's video. Once that job has ended (succeeded, failed or
    /// cancelled) the output is free again, which is how an edited spec is rendered anew.
    pub fn enqueue(
        &self,
        job: &Job,
        content_hash: &str,
        source: &str,
        max_attempts: u32,
    ) -> Result<Enqueued, QueueError> {
        let spec = serde_json::to_string(job).expect("a job serialises");
        let output = job.output_path().display().to_string();
        self.write(async |tx| {
            self.lock_output(tx, &output).await?;
            if let Some((other, state, source)) =
                self.output_taken(tx, &output, content_hash).await?
            {
                return Err(QueueError::OutputTaken {
                    output: output.clone(),
                    other,
                    state,
                    spec: source,
                });
            }
            // On PostgreSQL the live duplicate can finish between the insert and the lookup;
            // then the insert is simply tried again.
            let mut out = None;
            for _ in 0..3 {
                let inserted: Option<i64> = sqlx::query_scalar(self.sql(
                    "INSERT INTO jobs (content_hash, spec, source, output, priority, state, max_attempts, run_at, created_at)
                     VALUES ($1, $2, $3, $4, $5, 'queued', $6, {now}, {now})
                     ON CONFLICT (content_hash) WHERE state IN ('queued', 'running') DO NOTHING
                     RETURNING id",
                ))
                .bind(content_hash)
                .bind(&spec)
                .bind(source)
                .bind(&output)
                .bind(i64::from(job.priority))
                .bind(i64::from(max_attempts.max(1)))
                .fetch_optional(&mut *tx)
                .await
                .map_err(self.db_err())?;
                if let Some(id) = inserted {
                    out = Some(Enqueued {
                        id,
                        created: true,
                        state: "queued".into(),
                    });
                    break;
                }
                if let Some((id, state)) = self.live_job(tx, content_hash).await? {
                    out = Some(Enqueued {
                        id,
                        created: false,
                        state,
                    });
                    break;
                }
            }
            out.ok_or_else(|| QueueError::Db {
                location: self.location.clone(),
                error: sqlx::Error::Protocol(
                    "a job with the same content kept changing state; enqueue again".into(),
                ),
            })
        })
    }

    /// The newest successful job that rendered this content: its id, output path and the files
    /// it published (empty for jobs that succeeded before files were recorded).
    pub fn last_success(
        &self,
        content_hash: &str,
    ) -> Result<Option<(i64, String, Vec<OutputFile>)>, QueueError> {
        let row: Option<(i64, String, Option<String>)> = self
            .rt
            .block_on(
                sqlx::query_as(
                    "SELECT id, output, result FROM jobs WHERE rendered_hash = $1 AND state = 'succeeded'
                     ORDER BY id DESC LIMIT 1",
                )
                .bind(content_hash)
                .fetch_optional(&self.pool),
            )
            .map_err(self.db_err())?;
        Ok(row.map(|(id, output, result)| (id, output, split_result(result).1)))
    }

    /// Takes back expired leases, then claims the best due job (limited to `only` when given).
    pub fn claim(
        &self,
        worker: &str,
        ttl: Duration,
        only: Option<&[i64]>,
    ) -> Result<Option<Claim>, QueueError> {
        if only.is_some_and(<[i64]>::is_empty) {
            return Ok(None);
        }
        self.write(async |tx| {
            let expired: Vec<(i64, String)> = sqlx::query_as(self.sql(
                "SELECT id, lease_token FROM jobs WHERE state = 'running' AND lease_expires_at < {now}
                 {skip_locked}",
            ))
            .fetch_all(&mut *tx)
            .await
            .map_err(self.db_err())?;
            let mut reclaimed = 0;
            for (id, token) in &expired {
                let done = sqlx::query(self.sql(
                    "UPDATE jobs SET
                       state = CASE WHEN attempts >= max_attempts THEN 'failed' ELSE 'queued' END,
                       finished_at = CASE WHEN attempts >= max_attempts THEN {now} ELSE NULL END,
                       last_error = 'the lease of worker ' || lease_owner || ' expired during attempt '
                                    || attempts || ' of ' || max_attempts,
                       lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL,
                       reclaims = reclaims + 1, run_at = {now}
                     WHERE id = $1 AND lease_token = $2 AND state = 'running'",
                ))
                .bind(id)
                .bind(token)
                .execute(&mut *tx)
                .await
                .map_err(self.db_err())?;
                reclaimed += done.rows_affected();
                sqlx::query(self.sql(
                    "UPDATE attempts SET outcome = 'expired', finished_at = {now}
                     WHERE lease_token = $1 AND outcome IS NULL",
                ))
                .bind(token)
                .execute(&mut *tx)
                .await
                .map_err(self.db_err())?;
            }
            let next: Option<i64> = sqlx::query_scalar(self.sql(&format!(
                "SELECT id FROM jobs WHERE state = 'queued' AND run_at <= {{now}}{}
                 ORDER BY priority DESC, run_at, id LIMIT 1 {{skip_locked}}",
                id_filter(only)
            )))
            .fetch_optional(&mut *tx)
            .await
            .map_err(self.db_err())?;
            let Some(id) = next else {
                return Ok(None);
            };
            let token = new_token();
            let row = sqlx::query(self.sql(
                "UPDATE jobs SET state = 'running', attempts = attempts + 1, lease_token = $2,
                   lease_owner = $3, lease_expires_at = {now} + $4, started_at = {now}
                 WHERE id = $1 AND state = 'queued'
                 RETURNING spec, attempts, max_attempts",
            ))
            .bind(id)
            .bind(&token)
            .bind(worker)
            .bind(millis(ttl))
            .fetch_one(&mut *tx)
            .await
            .map_err(self.db_err())?;
            let spec: String = row.try_get("spec").map_err(self.db_err())?;
            let attempt: i64 = row.try_get("attempts").map_err(self.db_err())?;
            let max_attempts: i64 = row.try_get("max_attempts").map_err(self.db_err())?;
            sqlx::query(self.sql(
                "INSERT INTO attempts (lease_token, job_id, attempt, worker, started_at)
                 VALUES ($1, $2, $3, $4, {now})",
            ))
            .bind(&token)
            .bind(id)
            .bind(attempt)
            .bind(worker)
            .execute(&mut *tx)
            .await
            .map_err(self.db_err())?;
            Ok(Some(Claim {
                id,
                token,
                attempt: attempt as u32,
                max_attempts: max_attempts as u32,
                job: serde_json::from_str(&spec).map_err(|e| e.to_string()),
                reclaimed,
            }))
        })
    }

    /// Extends the lease; false when it is no longer ours (reclaimed, cancelled or finished).
    pub fn heartbeat(&self, id: i64, token: &str, ttl: Duration) -> Result<bool, QueueError> {
        self.write(async |tx| {
            let done = sqlx::query(self.sql(
                "UPDATE jobs SET lease_expires_at = {now} + $3
                 WHERE id = $1 AND lease_token = $2 AND state = 'running'",
            ))
            .bind(id)
            .bind(token)
            .bind(millis(ttl))
            .execute(&mut *tx)
            .await
            .map_err(self.db_err())?;
            Ok(done.rows_affected() == 1)
        })
    }

    /// Records that this attempt's render produced a finished video.
    pub fn mark_rendered(&self, token: &str) -> Result<(), QueueError> {
        self.write(async |tx| {
            sqlx::query(self.sql("UPDATE attempts SET rendered_at = {now} WHERE lease_token = $1"))
                .bind(token)
                .execute(&mut *tx)
                .await
                .map_err(self.db_err())?;
            Ok(())
        })
    }

    /// Marks the job succeeded with its render report and the content hash of what it rendered
    /// (`None` when the inputs changed during the render); false when the lease was lost.
    pub fn complete(
        &self,
        id: i64,
        token: &str,
        result: &str,
        rendered_hash: Option<&str>,
    ) -> Result<bool, QueueError> {
        self.write(async |tx| {
            let held = self
                .end_lease(
                    tx,
                    "UPDATE jobs SET state = 'succeeded', result = $3, last_error = NULL,
                   lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL, finished_at = {now}
                 WHERE id = $1 AND lease_token = $2 AND state = 'running'",
                    (id, token, Some(result)),
                    "succeeded",
                )
                .await?;
            if held {
                sqlx::query("UPDATE jobs SET rendered_hash = $2 WHERE id = $1")
                    .bind(id)
                    .bind(rendered_hash)
                    .execute(&mut *tx)
                    .await
                    .map_err(self.db_err())?;
            }
            Ok(held)
        })
    }

    /// Records a failed attempt: queued again after `delay`, or `failed` when out of attempts or
    /// when the failure is `permanent` (bad input: retrying cannot help until it is fixed).
    pub fn fail(
        &self,
        id: i64,
        token: &str,
        error: &str,
        delay: Duration,
        permanent: bool,
    ) -> Result<FailOutcome, QueueError> {
        self.write(async |tx| {
            let state: Option<String> = sqlx::query_scalar(self.sql(
                "UPDATE jobs SET
                   state = CASE WHEN attempts >= max_attempts OR $5 THEN 'failed' ELSE 'queued' END,
                   finished_at = CASE WHEN attempts >= max_attempts OR $5 THEN {now} ELSE NULL END,
                   run_at = {now} + $4, last_error = $3,
                   lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL
                 WHERE id = $1 AND lease_token = $2 AND state = 'running'
                 RETURNING state",
            ))
            .bind(id)
            .bind(token)
            .bind(error)
            .bind(millis(delay))
            .bind(permanent)
            .fetch_optional(&mut *tx)
            .await
            .map_err(self.db_err())?;
            let outcome = match state.as_deref() {
                None => FailOutcome::Lost,
                Some("failed") => FailOutcome::Failed,
                Some(_) => FailOutcome::Retry(delay),
            };
            let label = match outcome {
                FailOutcome::Lost => "lost",
                FailOutcome::Failed => "failed",
                FailOutcome::Retry(_) => "retry",
            };
            self.finish_attempt(tx, token, label, Some(error)).await?;
            Ok(outcome)
        })
    }

    /// Gives a job back unfinished (shutdown): queued again at once, the attempt not counted.
    pub fn release(&self, id: i64, token: &str) -> Result<bool, QueueError> {
        self.write(async |tx| {
            self.end_lease(
                tx,
                "UPDATE jobs SET state = 'queued', attempts = attempts - 1, run_at = {now},
                   lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL
                 WHERE id = $1 AND lease_token = $2 AND state = 'running'",
                (id, token, None),
                "released",
            )
            .await
        })
    }

    /// Ends job `id`'s lease with `update` (`$1` the job, `$2` the lease token, `$3` the text when
    /// given) and closes the attempt as `outcome`, or as `lost` when the lease was no longer ours;
    /// returns whether it was.
    async fn end_lease(
        &self,
        tx: &mut AnyConnection,
        update: &str,
        (id, token, text): (i64, &str, Option<&str>),
        outcome: &str,
    ) -> Result<bool, QueueError> {
        let mut query = sqlx::query(self.sql(update)).bind(id).bind(token);
        if let Some(text) = text {
            query = query.bind(text);
        }
        let done = query.execute(&mut *tx).await.map_err(self.db_err())?;
        let held = done.rows_affected() == 1;
        self.finish_attempt(tx, token, if held { outcome } else { "lost" }, None)
            .await?;
        Ok(held)
    }

    /// Closes an attempt row unless something else (a reclaim, a cancel) already did.
    async fn finish_attempt(
        &self,
        tx: &mut AnyConnection,
        token: &str,
        outcome: &str,
        error: Option<&str>,
    ) -> Result<(), QueueError> {
        sqlx::query(self.sql(
            "UPDATE attempts SET outcome = $2, error = $3, finished_at = {now}
             WHERE lease_token = $1 AND outcome IS NULL",
        ))
        .bind(token)
        .bind(outcome)
        .bind(error)
        .execute(tx)
        .await
        .map_err(self.db_err())?;
        Ok(())
    }

    /// Cancels a queued or running job.
    pub fn cancel(&self, id: i64) -> Result<Cancelled, QueueError> {
        self.write(async |tx| {
            let row: Option<(String, Option<String>)> =
                sqlx::query_as(self.sql("SELECT state, lease_token FROM jobs WHERE id = $1"))
                    .bind(id)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(self.db_err())?;
            let Some((state, token)) = row else {
                return Err(QueueError::NoSuchJob(id));
            };
            let was = match state.as_str() {
                "queued" => Cancelled::WasQueued,
                "running" => Cancelled::WasRunning,
                _ => {
                    return Err(QueueError::WrongState {
                        id,
                        state,
                        allowed: "queued or running",
                        action: "cancelled",
                    });
                }
            };
            sqlx::query(self.sql(
                "UPDATE jobs SET state = 'cancelled', finished_at = {now},
                   lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL
                 WHERE id = $1 AND state = $2",
            ))
            .bind(id)
            .bind(&state)
            .execute(&mut *tx)
            .await
            .map_err(self.db_err())?;
            if let Some(token) = token {
                self.finish_attempt(tx, &token, "cancelled", None).await?;
            }
            Ok(was)
        })
    }

    /// Queues a failed or cancelled job again with its attempts reset.
    pub fn retry(&self, id: i64) -> Result<(), QueueError> {
        self.write(async |tx| {
            let row: Option<(String, String, String)> =
                sqlx::query_as("SELECT state, content_hash, output FROM jobs WHERE id = $1")
                    .bind(id)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(self.db_err())?;
            let Some((state, hash, output)) = row else {
                return Err(QueueError::NoSuchJob(id));
            };
            if state != "failed" && state != "cancelled" {
                return Err(QueueError::WrongState {
                    id,
                    state,
                    allowed: "failed or cancelled",
                    action: "retried",
                });
            }
            if let Some((other, state)) = self.live_job(tx, &hash).await? {
                return Err(QueueError::Duplicate { id, other, state });
            }
            self.lock_output(tx, &output).await?;
            if let Some((other, state, source)) = self.output_taken(tx, &output, &hash).await? {
                return Err(QueueError::OutputTaken {
                    output,
                    other,
                    state,
                    spec: source,
                });
            }
            sqlx::query(self.sql(
                "UPDATE jobs SET state = 'queued', attempts = 0, run_at = {now}, finished_at = NULL
                 WHERE id = $1",
            ))
            .bind(id)
            .execute(&mut *tx)
            .await
            .map_err(self.db_err())?;
            Ok(())
        })
    }

    /// Jobs by id (all of them when `ids` is empty), oldest first.
    pub fn jobs(&self, ids: &[i64]) -> Result<Vec<JobRow>, QueueError> {
        let filter = if ids.is_empty() {
            String::new()
        } else {
            format!(" WHERE 1 = 1{}", id_filter(Some(ids)))
        };
        self.rt.block_on(async {
            let rows = sqlx::query(AssertSqlSafe(format!(
                "SELECT {JOB_COLUMNS} FROM jobs{filter} ORDER BY id"
            )))
            .fetch_all(&self.pool)
            .await
            .map_err(self.db_err())?;
            rows.iter()
                .map(job_row)
                .collect::<Result<_, _>>()
                .map_err(self.db_err())
        })
    }

    /// A job's claims, oldest first.
    pub fn attempts(&self, id: i64) -> Result<Vec<Attempt>, QueueError> {
        self.rt.block_on(async {
            let rows = sqlx::query(
                "SELECT attempt, worker, started_at, rendered_at, finished_at, outcome, error
                 FROM attempts WHERE job_id = $1 ORDER BY started_at, attempt",
            )
            .bind(id)
            .fetch_all(&self.pool)
            .await
            .map_err(self.db_err())?;
            rows.iter()
                .map(attempt_row)
                .collect::<Result<_, _>>()
                .map_err(self.db_err())
        })
    }

    /// Jobs per state and lease reclaims over the queue's life.
    pub fn counts(&self) -> Result<Counts, QueueError> {
        self.rt.block_on(async {
            let rows: Vec<(String, i64)> =
                sqlx::query_as("SELECT state, count(*) FROM jobs GROUP BY state")
                    .fetch_all(&self.pool)
                    .await
                    .map_err(self.db_err())?;
            let reclaims: i64 =
                sqlx::query_scalar("SELECT CAST(COALESCE(SUM(reclaims), 0) AS BIGINT) FROM jobs")
                    .fetch_one(&self.pool)
                    .await
                    .map_err(self.db_err())?;
            let mut c = Counts {
                lease_reclaims: reclaims.max(0) as u64,
                ..Counts::default()
            };
            for (state, n) in rows {
                let n = n.max(0) as u64;
                match state.as_str() {
                    "queued" => c.queued = n,
                    "running" => c.running = n,
                    "succeeded" => c.succeeded = n,
                    "failed" => c.failed = n,
                    "cancelled" => c.cancelled = n,
                    _ => {}
                }
            }
            Ok(c)
        })
    }

    /// Jobs still queued or running (among `only` when given): a draining worker waits for 0.
    pub fn live(&self, only: Option<&[i64]>) -> Result<u64, QueueError> {
        if only.is_some_and(<[i64]>::is_empty) {
            return Ok(0);
        }
        self.rt.block_on(async {
            let n: i64 = sqlx::query_scalar(AssertSqlSafe(format!(
                "SELECT count(*) FROM jobs WHERE state IN ('queued', 'running'){}",
                id_filter(only)
            )))
            .fetch_one(&self.pool)
            .await
            .map_err(self.db_err())?;
            Ok(n.max(0) as u64)
        })
    }
}
