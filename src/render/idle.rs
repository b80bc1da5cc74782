//! Idle life: seeded blinks and slow head sway, as a pure function of time.
//!
//! Input: a seed, whether the head must stay still, and a time. Output: blink amount and head pose.
//! Invariants: random access (any `t` in any order gives the same answer, so frames can be
//! rendered out of order or in parallel); blinks are 2–6 s apart and 120–250 ms long; the
//! sway is a sum of slow sines (≤ 0.25 Hz), so it is smooth; `still` → zero head motion but
//! blinks are kept (a portrait that never blinks looks dead, and blinks touch only the eyes).

use super::HeadPose;

/// Blinks fall one per slot of this length, jittered by ±1 s, so consecutive blinks are 2–6 s
/// apart and any slot can be computed on its own.
const SLOT: f64 = 4.0;

#[derive(Debug, Clone)]
pub struct Idle {
    seed: u64,
    still: bool,
    /// (frequency Hz, phase rad) of the three sines per axis: dx, dy, roll.
    sway: [[(f64, f64); 3]; 3],
}

impl Idle {
    pub fn new(seed: u64, still: bool) -> Idle {
        let mut rng = fastrand::Rng::with_seed(seed ^ 0x5EED_1D1E);
        let mut sine = || (0.05 + 0.2 * rng.f64(), std::f64::consts::TAU * rng.f64());
        let sway = [
            [sine(), sine(), sine()],
            [sine(), sine(), sine()],
            [sine(), sine(), sine()],
        ];
        Idle { seed, still, sway }
    }

    /// Blink amount (0 open .. 1 closed) and head pose at `t` seconds (t < 0 counts as 0).
    pub fn pose_at(&self, t: f64) -> (f32, HeadPose) {
        let t = if t.is_finite() { t.max(0.0) } else { 0.0 };
        (self.blink_at(t), self.head_at(t))
    }

    /// Start time and length of the blink in `slot`.
    fn blink(&self, slot: u64) -> (f64, f64) {
        let mut rng = fastrand::Rng::with_seed(
            self.seed ^ slot.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15),
        );
        let start = SLOT * slot as f64 + 0.5 * SLOT + (2.0 * rng.f64() - 1.0);
        let len = 0.12 + 0.13 * rng.f64();
        (start, len)
    }

    fn blink_at(&self, t: f64) -> f32 {
        let slot = (t / SLOT) as u64;
        let mut closed = 0.0f64;
        for s in [slot.saturating_sub(1), slot] {
            let (start, len) = self.blink(s);
            let u = (t - start) / len;
            if (0.0..1.0).contains(&u) {
                // Fast close, a short full closure, slower opening.
                let v = if u < 0.35 {
                    smooth(u / 0.35)
                } else if u < 0.5 {
                    1.0
                } else {
                    1.0 - smooth((u - 0.5) / 0.5)
                };
                closed = closed.max(v);
            }
        }
        closed as f32
    }

    fn head_at(&self, t: f64) -> HeadPose {
        if self.still {
            return HeadPose::default();
        }
        let wave = |axis: &[(f64, f64); 3]| {
            axis.iter()
                .enumerate()
                .map(|(i, &(f, ph))| (std::f64::consts::TAU * f * t + ph).sin() / (i + 1) as f64)
                .sum::<f64>()
                / 1.834
        };
        HeadPose {
            dx: (0.025 * wave(&self.sway[0])) as f32,
            dy: (0.015 * wave(&self.sway[1])) as f32,
            roll: (0.012 * wave(&self.sway[2])) as f32,
        }
    }
}

fn smooth(u: f64) -> f64 {
    let u = u.clamp(0.0, 1.0);
    u * u * (3.0 - 2.0 * u)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blink spans found by scanning at 5 ms.
    fn blinks(idle: &Idle, until: f64) -> Vec<(f64, f64)> {
        let mut out = Vec::new();
        let mut start = None;
        let step = 0.005;
        for i in 0..(until / step) as usize {
            let t = i as f64 * step;
            match (idle.pose_at(t).0 > 0.0, start) {
                (true, None) => start = Some(t),
                (false, Some(s)) => {
                    out.push((s, t));
                    start = None;
                }
                _ => {}
            }
        }
        out
    }

    #[test]
    fn blinks_are_spaced_and_sized_as_documented() {
        for seed in 0..20 {
            let b = blinks(&Idle::new(seed, false), 120.0);
            assert!(b.len() >= 20, "seed {seed}: {} blinks", b.len());
            for w in b.windows(2) {
                let gap = w[1].0 - w[0].0;
                assert!((1.98..=6.02).contains(&gap), "seed {seed}: interval {gap}");
            }
            for (s, e) in b {
                assert!(
                    (0.11..=0.26).contains(&(e - s)),
                    "seed {seed}: length {}",
                    e - s
                );
            }
        }
    }

    #[test]
    fn blinks_close_fully() {
        let idle = Idle::new(3, false);
        let peak = (0..24000)
            .map(|i| idle.pose_at(f64::from(i) * 0.001).0)
            .fold(0.0, f32::max);
        assert_eq!(peak, 1.0);
    }

    #[test]
    fn deterministic_random_access_and_seeded() {
        let a = Idle::new(11, false);
        let b = Idle::new(11, false);
        let ts: Vec<f64> = (0..500).map(|i| f64::from(i) * 0.0371).collect();
        let fwd: Vec<_> = ts.iter().map(|&t| a.pose_at(t)).collect();
        let back: Vec<_> = ts.iter().rev().map(|&t| b.pose_at(t)).collect();
        assert!(fwd.iter().eq(back.iter().rev()));
        let other = Idle::new(12, false);
        assert!(ts.iter().any(|&t| other.pose_at(t) != a.pose_at(t)));
    }

    #[test]
    fn head_sway_is_small_smooth_and_off_when_still() {
        let idle = Idle::new(5, false);
        let mut prev = idle.pose_at(0.0).1;
        let mut moved = false;
        for i in 1..4000 {
            let h = idle.pose_at(f64::from(i) * 0.01).1;
            assert!(h.dx.abs() <= 0.025 && h.dy.abs() <= 0.015 && h.roll.abs() <= 0.012);
            assert!((h.dx - prev.dx).abs() < 0.001, "jerk at {i}");
            moved |= h.dx != 0.0;
            prev = h;
        }
        assert!(moved);
        let still = Idle::new(5, true);
        for i in 0..1000 {
            assert_eq!(still.pose_at(f64::from(i) * 0.04).1, HeadPose::default());
        }
        // Still keeps the blinks.
        assert!(!blinks(&still, 20.0).is_empty());
        // Odd times are safe.
        assert_eq!(idle.pose_at(f64::NAN), idle.pose_at(0.0));
        assert_eq!(idle.pose_at(-5.0), idle.pose_at(0.0));
    }
}
