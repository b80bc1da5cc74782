//! The chunk work of one process: a fixed number of slots that every render the process runs
//! (`render`, `batch`, `worker --concurrency N`) draws and encodes its chunks in.
//!
//! A render starts one chunk thread per slot, and a thread holds a slot only while it works on a
//! chunk. So one render alone keeps every slot busy (the last long job of a batch spreads over
//! the cores), and N renders together never hold more slots than there are: they neither
//! oversubscribe the cores nor leave them idle while one of them still has chunks to do.

use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

/// How often a thread waiting for a slot looks at its render's stop flag.
const STOP_POLL: Duration = Duration::from_millis(50);

#[derive(Debug, Clone)]
pub struct ChunkPool {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    slots: usize,
    free: Mutex<usize>,
    freed: Condvar,
}

/// A slot, held while one chunk is drawn and encoded; dropping it frees the slot.
pub struct Slot<'a> {
    pool: &'a ChunkPool,
}

impl ChunkPool {
    /// A pool of `slots` (at least one).
    pub fn new(slots: usize) -> ChunkPool {
        let slots = slots.max(1);
        ChunkPool {
            inner: Arc::new(Inner {
                slots,
                free: Mutex::new(slots),
                freed: Condvar::new(),
            }),
        }
    }

    pub fn slots(&self) -> usize {
        self.inner.slots
    }

    /// Waits for a free slot; `None` once `stopped` says the render is stopping.
    pub fn take(&self, stopped: &dyn Fn() -> bool) -> Option<Slot<'_>> {
        // The count cannot be left half-updated by a panic: recovering the lock is safe.
        let mut free = self
            .inner
            .free
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        loop {
            if stopped() {
                return None;
            }
            if *free > 0 {
                *free -= 1;
                return Some(Slot { pool: self });
            }
            free = self
                .inner
                .freed
                .wait_timeout(free, STOP_POLL)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        let inner = &self.pool.inner;
        *inner.free.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        inner.freed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    #[test]
    fn never_more_holders_than_slots_and_every_taker_served() {
        let pool = ChunkPool::new(3);
        let (holding, most, served) = (
            AtomicUsize::new(0),
            AtomicUsize::new(0),
            AtomicUsize::new(0),
        );
        std::thread::scope(|s| {
            for _ in 0..12 {
                s.spawn(|| {
                    for _ in 0..20 {
                        let _slot = pool.take(&|| false).expect("not stopped");
                        let now = holding.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_micros(200));
                        holding.fetch_sub(1, Ordering::SeqCst);
                        served.fetch_add(1, Ordering::SeqCst);
                    }
                });
            }
        });
        assert_eq!(most.load(Ordering::SeqCst), 3);
        assert_eq!(served.load(Ordering::SeqCst), 240);
    }

    #[test]
    fn a_stopped_render_stops_waiting() {
        let pool = ChunkPool::new(1);
        let held = pool.take(&|| false).expect("a free slot");
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            let waiter = s.spawn(|| pool.take(&|| stop.load(Ordering::SeqCst)).is_none());
            std::thread::sleep(Duration::from_millis(120));
            stop.store(true, Ordering::SeqCst);
            assert!(waiter.join().unwrap(), "a stopped waiter gets no slot");
        });
        drop(held);
        assert!(pool.take(&|| false).is_some());
    }
}
