//! `talker worker --metrics ADDR`: Prometheus text on a plain `std::net` listener.
//!
//! Input: the worker's tallies of its own renders, and the queue's counts read at scrape time.
//! Output: `GET /metrics` (or `/`) → text exposition format 0.0.4; anything else → 404.
//! Invariants: one short-lived connection at a time, a read timeout so a silent client cannot
//! stall it, and a non-blocking accept loop that ends when the worker stops.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::report::RenderReport;

use super::{Counts, Queue};

/// What this worker has done since it started.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Tally {
    pub succeeded: u64,
    pub retried: u64,
    pub failed: u64,
    pub released: u64,
    pub lost: u64,
    pub reclaims: u64,
    pub render_seconds: f64,
    pub audio_seconds: f64,
    pub chunks: u64,
    pub chunks_reused: u64,
    pub phrase_hits: u64,
    pub phrases_synthesized: u64,
    pub running: u64,
}

/// The worker's tallies, shared by its job threads and the metrics listener.
#[derive(Debug, Default)]
pub struct Metrics {
    tally: Mutex<Tally>,
}

impl Metrics {
    pub fn update(&self, f: impl FnOnce(&mut Tally)) {
        f(&mut self.tally.lock().expect("metrics"));
    }

    pub fn record_render(&self, r: &RenderReport) {
        self.update(|t| {
            t.succeeded += 1;
            t.render_seconds += r.wall_seconds;
            t.audio_seconds += r.audio_seconds;
            t.chunks += r.chunks as u64;
            t.chunks_reused += r.chunks_reused as u64;
            t.phrase_hits += r.phrase_hits;
            t.phrases_synthesized += r.speech.synthesized;
        });
    }

    pub fn snapshot(&self) -> Tally {
        *self.tally.lock().expect("metrics")
    }
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 { a / b } else { 0.0 }
}

/// The exposition text; queue-wide series are left out when the database could not be read.
fn exposition(t: &Tally, counts: Option<&Counts>) -> String {
    let mut s = String::new();
    let mut metric = |name: &str, kind: &str, help: &str, samples: &[(&str, f64)]| {
        let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (labels, v) in samples {
            let _ = writeln!(s, "{name}{labels} {v}");
        }
    };
    if let Some(c) = counts {
        metric(
            "talker_jobs",
            "gauge",
            "Jobs in the queue by state.",
            &[
                ("{state=\"queued\"}", c.queued as f64),
                ("{state=\"running\"}", c.running as f64),
                ("{state=\"succeeded\"}", c.succeeded as f64),
                ("{state=\"failed\"}", c.failed as f64),
                ("{state=\"cancelled\"}", c.cancelled as f64),
            ],
        );
        metric(
            "talker_queue_lease_reclaims_total",
            "counter",
            "Expired leases taken back from stopped workers, over the whole queue.",
            &[("", c.lease_reclaims as f64)],
        );
    }
    metric(
        "talker_worker_lease_reclaims_total",
        "counter",
        "Expired leases this worker took back.",
        &[("", t.reclaims as f64)],
    );
    metric(
        "talker_worker_jobs_running",
        "gauge",
        "Renders in progress in this worker.",
        &[("", t.running as f64)],
    );
    metric(
        "talker_worker_attempts_total",
        "counter",
        "Attempts this worker finished, by outcome.",
        &[
            ("{outcome=\"succeeded\"}", t.succeeded as f64),
            ("{outcome=\"retry\"}", t.retried as f64),
            ("{outcome=\"failed\"}", t.failed as f64),
            ("{outcome=\"released\"}", t.released as f64),
            ("{outcome=\"lease_lost\"}", t.lost as f64),
        ],
    );
    metric(
        "talker_render_seconds",
        "summary",
        "Wall seconds of this worker's successful renders.",
        &[("_sum", t.render_seconds), ("_count", t.succeeded as f64)],
    );
    metric(
        "talker_audio_seconds_total",
        "counter",
        "Seconds of speech in this worker's successful renders.",
        &[("", t.audio_seconds)],
    );
    metric(
        "talker_realtime_factor",
        "gauge",
        "Seconds of video rendered per wall second, over this worker's successful renders.",
        &[("", ratio(t.audio_seconds, t.render_seconds))],
    );
    metric(
        "talker_cache_hit_ratio",
        "gauge",
        "Share of video chunks and of sentences (in chunks that were rendered) found in the cache.",
        &[
            (
                "{cache=\"chunk\"}",
                ratio(t.chunks_reused as f64, t.chunks as f64),
            ),
            (
                "{cache=\"phrase\"}",
                ratio(
                    t.phrase_hits as f64,
                    (t.phrase_hits + t.phrases_synthesized) as f64,
                ),
            ),
        ],
    );
    s
}

/// Serves scrapes until `stop` is set.
pub fn serve(listener: &TcpListener, metrics: &Metrics, queue: &Queue, stop: &AtomicBool) {
    if let Err(e) = listener.set_nonblocking(true) {
        tracing::warn!("metrics listener: {e}");
        return;
    }
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                if let Err(e) = answer(stream, metrics, queue) {
                    tracing::debug!("metrics request: {e}");
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => {
                tracing::warn!("metrics listener: {e}");
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }
}

fn answer(mut stream: TcpStream, metrics: &Metrics, queue: &Queue) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    let mut request = Vec::new();
    let mut buf = [0u8; 1024];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < 8192 {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            break;
        }
        request.extend_from_slice(&buf[..n]);
    }
    let line = String::from_utf8_lossy(&request);
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let (status, body) = if method == "GET" && (path == "/metrics" || path == "/") {
        let counts = queue
            .counts()
            .map_err(|e| tracing::warn!("metrics: {e}"))
            .ok();
        ("200 OK", exposition(&metrics.snapshot(), counts.as_ref()))
    } else {
        ("404 Not Found", "try GET /metrics\n".to_owned())
    };
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    stream.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposition_has_every_series_and_ratios() {
        let t = Tally {
            succeeded: 2,
            render_seconds: 4.0,
            audio_seconds: 10.0,
            chunks: 4,
            chunks_reused: 1,
            phrase_hits: 3,
            phrases_synthesized: 1,
            reclaims: 1,
            ..Tally::default()
        };
        let c = Counts {
            queued: 5,
            lease_reclaims: 2,
            ..Counts::default()
        };
        let text = exposition(&t, Some(&c));
        for line in [
            "talker_jobs{state=\"queued\"} 5",
            "talker_queue_lease_reclaims_total 2",
            "talker_worker_lease_reclaims_total 1",
            "talker_render_seconds_sum 4",
            "talker_render_seconds_count 2",
            "talker_realtime_factor 2.5",
            "talker_cache_hit_ratio{cache=\"chunk\"} 0.25",
            "talker_cache_hit_ratio{cache=\"phrase\"} 0.75",
            "# TYPE talker_render_seconds summary",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "{line:?} missing in\n{text}"
            );
        }
        let without = exposition(&Tally::default(), None);
        assert!(!without.contains("talker_jobs{"));
        assert!(without.contains("talker_realtime_factor 0"));
    }
}
