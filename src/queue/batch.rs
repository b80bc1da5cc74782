//! `talker batch DIR`: a folder of job specs rendered to completion by this process. A spec
//! whose current content a job already rendered, with every file it published still in place and
//! unchanged (size and sha256), is up to date and skipped; the others are enqueued, and one
//! worker drains exactly those jobs.
//!
//! The binary supplies what is its own: how a spec file becomes a job (it checks the portrait's
//! face with the models it located), how a refused spec is reported, and what is printed.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use crate::speech::SpeechService;

use super::publish::OutputFile;
use super::worker::{self, Observer, WorkerOptions};
use super::{Enqueued, Job, JobRow, Queue, QueueError};

/// The job specs of a batch folder: its `*.json` regular files (not recursive), by name.
pub fn spec_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut specs: Vec<PathBuf> = std::fs::read_dir(dir)?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json") && p.is_file())
        .collect();
    specs.sort();
    Ok(specs)
}

/// What became of one spec file.
#[derive(Debug, Clone)]
pub enum Admission {
    /// A job rendered this content and every file it published is still as it was.
    UpToDate { id: i64 },
    /// Queued now, or found already queued or running with the same content.
    Enqueued(Enqueued),
}

/// The specs as admitted: how many were refused, how many were up to date, and the jobs the
/// batch's worker is to run.
#[derive(Debug, Clone, Default)]
pub struct Admitted {
    pub refused: usize,
    pub up_to_date: usize,
    pub ids: Vec<i64>,
}

/// How a batch turns a spec file into work; the binary implements it.
pub trait Admit {
    type Error: From<QueueError>;
    /// The spec as a job and its content hash, or why it cannot be one.
    fn load(&mut self, spec: &Path) -> Result<(Job, String), Self::Error>;
    /// Adds the job to the queue.
    fn enqueue(&mut self, spec: &Path, job: &Job, hash: &str) -> Result<Enqueued, Self::Error>;
    /// A spec that failed to load or enqueue: `Ok` counts it as refused and the batch goes on
    /// (bad input in one file must not hide the rest), `Err` stops the batch.
    fn refuse(&mut self, error: Self::Error) -> Result<(), Self::Error>;
    /// Told once per spec that was not refused.
    fn admitted(&mut self, spec: &Path, what: &Admission);
}

/// Every spec, in order: loaded, skipped when up to date, else enqueued.
pub fn admit<A: Admit>(
    queue: &Queue,
    specs: &[PathBuf],
    admit: &mut A,
) -> Result<Admitted, A::Error> {
    let mut out = Admitted::default();
    for path in specs {
        let (job, hash) = match admit.load(path) {
            Ok(j) => j,
            Err(e) => {
                admit.refuse(e)?;
                out.refused += 1;
                continue;
            }
        };
        if let Some((id, output, files)) = queue.last_success(&hash)?
            && published_intact(&output, &files)
        {
            admit.admitted(path, &Admission::UpToDate { id });
            out.up_to_date += 1;
            continue;
        }
        match admit.enqueue(path, &job, &hash) {
            Ok(e) => {
                out.ids.push(e.id);
                admit.admitted(path, &Admission::Enqueued(e));
            }
            Err(e) => {
                admit.refuse(e)?;
                out.refused += 1;
            }
        }
    }
    Ok(out)
}

/// Whether a successful job's files are still what it published; a job that succeeded before
/// files were recorded has only its output to look for.
fn published_intact(output: &str, files: &[OutputFile]) -> bool {
    if files.is_empty() {
        return Path::new(output).is_file();
    }
    files.iter().all(OutputFile::is_intact)
}

/// Runs a worker over the admitted jobs only, until none of them is left (or `shutdown`), and
/// returns their rows as they ended.
pub fn drain(
    queue: &Queue,
    opts: &WorkerOptions,
    ids: &[i64],
    speech: &SpeechService,
    observer: &dyn Observer,
    shutdown: &AtomicBool,
    metrics: Option<TcpListener>,
) -> Result<Vec<JobRow>, QueueError> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let opts = WorkerOptions {
        only: Some(ids.to_vec()),
        drain: true,
        ..opts.clone()
    };
    worker::run(queue, &opts, speech, observer, shutdown, metrics);
    queue.jobs(ids)
}
