//! Timing rules: from sound segments to held mouth shapes and the tweens between them.
//!
//! Input: contiguous [`Segment`]s (see `segments.rs`). Output: contiguous [`VisemeKey`]s covering
//! the same time span.
//! Invariants (checked by the tests in `mod.rs`):
//! - every Shape/Relax key lasts ≥ [`MIN_SHAPE`] unless the whole track is shorter; tweens are
//!   [`TWEEN_MIN`]..=[`TWEEN_MAX`] long and always sit between two held keys;
//! - every m/b/p yields a held key with `open == 0` that ends at (or just before, by a tween) the
//!   release, the acoustic end of the m/b/p; f/v yield a held `lower_lip_tuck` key;
//! - pauses shorter than [`PAUSE_HOLD`] hold the previous shape, up to [`PAUSE_RELAX`] relax it,
//!   longer ones return to rest;
//! - pure arithmetic on the input: the same input always gives the same keys.

use super::ipa::{Lips, Stress};
use super::pose::MouthPose;
use super::segments::{Segment, Sound};
use super::viseme::Viseme;
use super::{KeyKind, VisemeKey};

/// Shortest held shape (Rhubarb: shorter shapes read as flicker).
pub const MIN_SHAPE: f64 = 0.07;
/// Shortest tween worth inserting; shorter transitions are cuts.
pub const TWEEN_MIN: f64 = 0.025;
/// Longest tween (Rhubarb: 4–8 cs).
pub const TWEEN_MAX: f64 = 0.08;
/// Pauses shorter than this keep the previous shape (Rhubarb: 12 cs).
pub const PAUSE_HOLD: f64 = 0.12;
/// Pauses up to this relax the previous shape halfway; longer ones go to rest (Rhubarb: 35 cs).
pub const PAUSE_RELAX: f64 = 0.35;
/// How far a vowel's shape starts before its sound after a tongue consonant.
const ANTICIPATE: f64 = 0.05;
/// How far the first shape after a pause starts before its sound.
const ANTICIPATE_AFTER_PAUSE: f64 = 0.12;
/// How far the lips start closing (m/b/p) or tucking (f/v) before the consonant's sound.
const CLOSURE_LEAD: f64 = 0.03;

/// A held shape while the rules are applied.
#[derive(Debug, Clone, Copy)]
struct Draft {
    start: f64,
    end: f64,
    viseme: Viseme,
    kind: KeyKind,
    pose: MouthPose,
}

impl Draft {
    fn dur(&self) -> f64 {
        self.end - self.start
    }
    /// m/b/p closures and f/v contacts must survive the minimum-duration pass.
    fn protected(&self) -> bool {
        matches!(self.viseme, Viseme::Pp | Viseme::Ff) && self.kind == KeyKind::Shape
    }
    fn spare(&self) -> f64 {
        (self.dur() - MIN_SHAPE).max(0.0)
    }
}

pub(crate) fn keys(segs: &[Segment]) -> Vec<VisemeKey> {
    let mut drafts = shapes(segs);
    anticipate(segs, &mut drafts);
    merge_equal(&mut drafts);
    enforce_min(&mut drafts);
    tweens(&drafts)
}

fn vowel_pose(v: Viseme, stress: Option<Stress>) -> MouthPose {
    let scale = match stress {
        Some(Stress::Primary) => 1.0,
        Some(Stress::Secondary) => 0.9,
        None => 0.75,
    };
    let mut p = v.pose();
    p.open *= scale;
    p
}

/// The vowel a lips-free sound at `i` leans towards: the next vowel in the same phrase, else the
/// previous one, else rest.
fn context(segs: &[Segment], i: usize) -> Option<(Viseme, MouthPose)> {
    let vowel = |s: &Segment| match s.sound {
        Sound::Vowel(v, st) => Some((v, vowel_pose(v, st))),
        _ => None,
    };
    let next = segs[i + 1..]
        .iter()
        .take_while(|s| s.sound != Sound::Pause)
        .find_map(vowel);
    next.or_else(|| {
        segs[..i]
            .iter()
            .rev()
            .take_while(|s| s.sound != Sound::Pause)
            .find_map(vowel)
    })
}

/// One draft per segment: its target shape, with pauses resolved by length.
fn shapes(segs: &[Segment]) -> Vec<Draft> {
    let mut out: Vec<Draft> = Vec::with_capacity(segs.len());
    for (i, s) in segs.iter().enumerate() {
        let (viseme, kind, pose) = match s.sound {
            Sound::Vowel(v, st) => (v, KeyKind::Shape, vowel_pose(v, st)),
            Sound::Consonant(v, Lips::Busy) => (v, KeyKind::Shape, v.pose()),
            Sound::Consonant(v, Lips::Free(own)) => {
                let ctx = context(segs, i).map_or(MouthPose::REST, |c| c.1);
                (v, KeyKind::Shape, ctx.lerp(&v.pose(), own))
            }
            Sound::Transparent => match context(segs, i) {
                Some((v, mut p)) => {
                    p.open *= 0.8;
                    (v, KeyKind::Shape, p)
                }
                None => (Viseme::Sil, KeyKind::Shape, MouthPose::REST),
            },
            Sound::Pause => {
                let dur = s.end - s.start;
                let edge = i == 0 || i + 1 == segs.len();
                match out.last() {
                    Some(prev) if !edge && dur < PAUSE_HOLD => (prev.viseme, prev.kind, prev.pose),
                    Some(prev) if !edge && dur <= PAUSE_RELAX => (
                        prev.viseme,
                        KeyKind::Relax,
                        prev.pose.lerp(&MouthPose::REST, 0.5),
                    ),
                    _ => (Viseme::Sil, KeyKind::Shape, MouthPose::REST),
                }
            }
        };
        out.push(Draft {
            start: s.start,
            end: s.end,
            viseme,
            kind,
            pose,
        });
    }
    out
}

/// Vowel anticipation: a vowel's shape starts before its sound when the lips are free before
/// it (tongue consonants, h, pauses). m/b/p and f/v keep their shape until the release and
/// start a little before their sound, so the lips are shut when it starts.
fn anticipate(segs: &[Segment], drafts: &mut [Draft]) {
    for i in 0..segs.len().saturating_sub(1) {
        let lead = match (segs[i].sound, segs[i + 1].sound) {
            (Sound::Consonant(_, Lips::Free(_)) | Sound::Transparent, Sound::Vowel(..)) => {
                ANTICIPATE.min(0.5 * drafts[i].dur())
            }
            (Sound::Pause, next) if next != Sound::Pause => {
                let held = drafts[i].kind == KeyKind::Shape && drafts[i].viseme != Viseme::Sil;
                if held {
                    0.0
                } else {
                    ANTICIPATE_AFTER_PAUSE.min(0.5 * drafts[i].dur())
                }
            }
            (prev, Sound::Consonant(Viseme::Pp | Viseme::Ff, Lips::Busy))
                if !matches!(prev, Sound::Consonant(Viseme::Pp | Viseme::Ff, _)) =>
            {
                CLOSURE_LEAD.min(0.3 * drafts[i].dur())
            }
            _ => 0.0,
        };
        if lead > 0.0 {
            drafts[i].end -= lead;
            drafts[i + 1].start -= lead;
        }
    }
}

/// Joins neighbours that would look identical, so holds are not split into pieces.
fn merge_equal(drafts: &mut Vec<Draft>) {
    let mut out: Vec<Draft> = Vec::with_capacity(drafts.len());
    for d in drafts.drain(..) {
        match out.last_mut() {
            Some(last)
                if last.viseme == d.viseme
                    && last.kind == d.kind
                    && last.pose.distance(&d.pose) < 1e-3 =>
            {
                last.end = d.end;
            }
            _ => out.push(d),
        }
    }
    *drafts = out;
}

/// Makes every held shape at least [`MIN_SHAPE`] long: a short shape first borrows its
/// neighbours' spare time; if that is not enough it is merged into its most similar neighbour,
/// except m/b/p and f/v, which take the time from a neighbour instead.
fn enforce_min(drafts: &mut Vec<Draft>) {
    // Tolerance relative to the time scale (hours-long inputs lose sub-ns precision), and a
    // round limit as a backstop: every round merges a key or lengthens a short one, so
    // real inputs finish in far fewer rounds.
    let end = drafts.last().map_or(0.0, |d| d.end.abs());
    let eps = (end * 1e-12).max(1e-9);
    let rounds = 8 * drafts.len() + 16;
    for _ in 0..rounds {
        if drafts.len() < 2 {
            return;
        }
        let Some(i) = (0..drafts.len())
            .filter(|&i| drafts[i].dur() < MIN_SHAPE - eps)
            .min_by(|&a, &b| drafts[a].dur().total_cmp(&drafts[b].dur()))
        else {
            return;
        };
        let need = MIN_SHAPE - drafts[i].dur();
        let prev = i.checked_sub(1);
        let next = (i + 1 < drafts.len()).then_some(i + 1);
        // A closure before the short key keeps its end: that is the release.
        let spare = |j: Option<usize>| {
            j.map_or(0.0, |j| {
                if j < i && drafts[j].protected() {
                    0.0
                } else {
                    drafts[j].spare()
                }
            })
        };
        let protected = drafts[i].protected();
        // A closure takes its time from before it whenever the key before can give it (even
        // below the minimum: that key is then merged or refilled in a later round), so the
        // lips still part exactly on the release.
        if let Some(p) = prev.filter(|&p| protected && !drafts[p].protected())
            && drafts[p].dur() > need + 0.02
        {
            drafts[p].end -= need;
            drafts[i].start -= need;
            continue;
        }
        if spare(prev) + spare(next) >= need - eps {
            // Closures borrow from before (so they still end at the release); others from the
            // roomier side first.
            let prev_first = protected || spare(prev) >= spare(next);
            let from_prev = if prev_first {
                need.min(spare(prev))
            } else {
                need - need.min(spare(next))
            };
            let from_next = need - from_prev;
            if let Some(p) = prev {
                drafts[p].end -= from_prev;
                drafts[i].start -= from_prev;
            }
            if let Some(n) = next {
                drafts[n].start += from_next;
                drafts[i].end += from_next;
            }
            continue;
        }
        let donor = if protected {
            // Take the time from an unprotected neighbour even if that one becomes short (it
            // may be merged away later): the less open one, so vowels survive, and on a tie
            // the one before, so the release stays in place.
            [prev, next]
                .into_iter()
                .flatten()
                .filter(|&j| !drafts[j].protected())
                .min_by(|&a, &b| drafts[a].pose.open.total_cmp(&drafts[b].pose.open))
        } else {
            None
        };
        if let Some(j) = donor {
            let take = need.min(drafts[j].dur());
            if j < i {
                drafts[j].end -= take;
                drafts[i].start -= take;
            } else {
                drafts[j].start += take;
                drafts[i].end += take;
            }
            if drafts[j].dur() <= eps {
                drafts.remove(j);
            }
            continue;
        }
        // Merge into the neighbour that looks most alike.
        let target = [prev, next]
            .into_iter()
            .flatten()
            .min_by(|&a, &b| {
                let da = drafts[a].pose.distance(&drafts[i].pose);
                let db = drafts[b].pose.distance(&drafts[i].pose);
                da.total_cmp(&db)
            })
            .unwrap_or(0);
        if target < i {
            drafts[target].end = drafts[i].end;
        } else {
            drafts[target].start = drafts[i].start;
        }
        drafts.remove(i);
        merge_equal(drafts);
    }
}

/// Inserts a tween at each boundary between visibly different shapes, carved from the spare
/// time of the two shapes so neither drops below [`MIN_SHAPE`].
fn tweens(drafts: &[Draft]) -> Vec<VisemeKey> {
    let n = drafts.len();
    // Time each draft gives to the tween on its left and on its right.
    let mut left = vec![0.0f64; n];
    let mut right = vec![0.0f64; n];
    for i in 0..n.saturating_sub(1) {
        let (a, b) = (&drafts[i], &drafts[i + 1]);
        let d = f64::from(a.pose.distance(&b.pose));
        if d < 0.08 {
            continue;
        }
        let want = (0.03 + 0.05 * d).min(TWEEN_MAX);
        // A closure is reached on time and held to the release: most of a tween into it comes
        // from before it, most of a tween out of it from after it.
        let cap = |x: &Draft| if x.protected() { 0.3 * want } else { want };
        let room_a = (a.spare() - left[i]).max(0.0).min(cap(a));
        let room_b = b.spare().min(cap(b));
        let mut take_a = room_a.min(want / 2.0);
        let take_b = room_b.min(want - take_a);
        take_a = room_a.min(want - take_b);
        if take_a + take_b >= TWEEN_MIN {
            right[i] = take_a;
            left[i + 1] = take_b;
        }
    }
    let mut out = Vec::with_capacity(2 * n);
    for (i, d) in drafts.iter().enumerate() {
        if left[i] > 0.0 || (i > 0 && right[i - 1] > 0.0) {
            out.push(VisemeKey {
                start: d.start - right[i - 1],
                end: d.start + left[i],
                viseme: d.viseme,
                kind: KeyKind::Tween,
                pose: d.pose,
            });
        }
        out.push(VisemeKey {
            start: d.start + left[i],
            end: d.end - right[i],
            viseme: d.viseme,
            kind: d.kind,
            pose: d.pose,
        });
    }
    out
}
