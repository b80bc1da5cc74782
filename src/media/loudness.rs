//! Loudness to a publishing standard: measure (ITU BS.1770 / EBU R128 through the `ebur128`
//! crate, plus ACX's RMS, peak, noise floor and room tone), judge, and bring a whole book to a
//! target with one gain and a lookahead peak limiter.
//!
//! Input: PCM, any number of pushes. Output: [`Figures`] and, per [`Standard`], a list of
//! [`Criterion`] with pass/fail. Memory: the meters keep running sums and `ebur128`'s gating
//! histogram, the limiter a few milliseconds of samples; a 10-hour book needs no more.

use serde::Serialize;

use ebur128::{EbuR128, Mode};

/// dB figures of digital silence (−∞) are reported as this, so JSON can hold them.
const SILENCE_DB: f64 = -150.0;

/// Time constant of the RMS whose minimum is the noise floor: short enough to settle inside a
/// pause between sentences (it falls 8.7 dB per 50 ms), and the same measure as FFmpeg's
/// `astats=length=0.05` "RMS trough", so a user can reproduce it.
const FLOOR_SECONDS: f64 = 0.05;

/// A sample above this (−40 dBFS) ends the leading room tone and starts the trailing one.
const SOUND_THRESHOLD: f64 = 0.01;

/// A publishing standard's loudness rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Standard {
    /// Audible's ACX: RMS −23..−18 dB, peak ≤ −3 dBFS, noise floor ≤ −60 dB, room tone at
    /// both ends, mono 44.1 kHz.
    Acx,
    /// Apple Podcasts and most platforms: −16 LUFS stereo, −19 LUFS mono, ≤ −1 dBTP.
    Podcast,
    /// EBU R128: −23 LUFS, ≤ −1 dBTP.
    Broadcast,
}

/// Room tone of an ACX file: leading seconds we aim at (ACX: 0.5–1 s) and trailing (1–5 s).
pub const ACX_LEAD_SECONDS: f64 = 0.75;
pub const ACX_TAIL_SECONDS: f64 = 2.0;
/// Level of the room tone added to ACX books: ACX rejects digital silence and wants the floor
/// at −60 dB RMS or lower; −70 dB is a quiet booth's and sits well under the limit.
pub const ROOM_TONE_DB: f64 = -70.0;

impl Standard {
    pub fn name(self) -> &'static str {
        match self {
            Standard::Acx => "acx",
            Standard::Podcast => "podcast",
            Standard::Broadcast => "broadcast",
        }
    }

    /// The integrated loudness a file with `channels` channels must have, with its tolerance in
    /// LU (Apple: ±1 LU; R128 for programmes made in advance: ±0.5 LU).
    fn lufs_target(self, channels: u32) -> Option<(f64, f64)> {
        match self {
            Standard::Acx => None,
            Standard::Podcast if channels == 1 => Some((-19.0, 1.0)),
            Standard::Podcast => Some((-16.0, 1.0)),
            Standard::Broadcast => Some((-23.0, 0.5)),
        }
    }

    /// The one gain (dB) that brings `figures` to this standard's aim: −20 dB RMS for ACX (the
    /// middle of its range), the integrated target otherwise.
    pub fn gain_db(self, figures: &Figures) -> f64 {
        let (aim, now) = match self.lufs_target(figures.channels) {
            Some((target, _)) => (target, figures.integrated_lufs),
            None => (-20.0, figures.rms_db),
        };
        if now <= SILENCE_DB { 0.0 } else { aim - now }
    }

    /// Where the limiter holds sample peaks: below the standard's peak limit by a margin for the
    /// overshoot of inter-sample peaks and of the lossy encoder (measured on rendered books).
    fn ceiling_db(self) -> f64 {
        match self {
            Standard::Acx => -4.0,
            Standard::Podcast | Standard::Broadcast => -2.5,
        }
    }

    /// Each rule of the standard applied to `f`.
    pub fn judge(self, f: &Figures) -> Vec<Criterion> {
        let mut c = Vec::new();
        let mut add = |name: &'static str, value: f64, unit: &'static str, rule: String, pass| {
            c.push(Criterion {
                name,
                value,
                unit,
                rule,
                pass,
            })
        };
        match self.lufs_target(f.channels) {
            None => {
                add(
                    "rms",
                    f.rms_db,
                    "dB",
                    "-23 to -18".into(),
                    (-23.0..=-18.0).contains(&f.rms_db),
                );
                add(
                    "peak",
                    f.sample_peak_db,
                    "dBFS",
                    "at most -3".into(),
                    f.sample_peak_db <= -3.0,
                );
                add(
                    "noise_floor",
                    f.noise_floor_db,
                    "dB",
                    "at most -60".into(),
                    f.noise_floor_db <= -60.0,
                );
                add(
                    "room_tone_start",
                    f.lead_seconds,
                    "s",
                    "0.5 to 1".into(),
                    (0.5..=1.0).contains(&f.lead_seconds),
                );
                add(
                    "room_tone_end",
                    f.tail_seconds,
                    "s",
                    "1 to 5".into(),
                    (1.0..=5.0).contains(&f.tail_seconds),
                );
                add(
                    "channels",
                    f64::from(f.channels),
                    "",
                    "1 (mono)".into(),
                    f.channels == 1,
                );
                add(
                    "sample_rate",
                    f64::from(f.sample_rate),
                    "Hz",
                    "44100".into(),
                    f.sample_rate == 44_100,
                );
            }
            Some((target, tolerance)) => {
                add(
                    "integrated",
                    f.integrated_lufs,
                    "LUFS",
                    format!("{target} ± {tolerance}"),
                    (f.integrated_lufs - target).abs() <= tolerance,
                );
                add(
                    "true_peak",
                    f.true_peak_db,
                    "dBTP",
                    "at most -1".into(),
                    f.true_peak_db <= -1.0,
                );
            }
        }
        c
    }
}

/// One rule of a standard, its measured value and whether the value keeps it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Criterion {
    pub name: &'static str,
    pub value: f64,
    pub unit: &'static str,
    /// The rule in words ("at most -3").
    pub rule: String,
    pub pass: bool,
}

/// A render's loudness: the standard, the speech as synthesised, the one gain applied, the
/// output as written (before any lossy encoder) and the standard's rules applied to it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Levelled {
    pub standard: Standard,
    pub before: Figures,
    pub gain_db: f64,
    pub after: Figures,
    pub criteria: Vec<Criterion>,
}

/// What a [`Meter`] measured. dB figures of silence read [`SILENCE_DB`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figures {
    /// ITU BS.1770 integrated loudness (gated), LUFS.
    pub integrated_lufs: f64,
    /// BS.1770 true peak (oversampled), dBTP, the loudest channel.
    pub true_peak_db: f64,
    /// Largest sample, dBFS.
    pub sample_peak_db: f64,
    /// RMS of every sample of every channel, dB (ACX's "RMS").
    pub rms_db: f64,
    /// The quietest RMS with a 50 ms time constant, after the first 50 ms, dB (ACX's "noise
    /// floor"; FFmpeg's `astats=length=0.05` "RMS trough").
    pub noise_floor_db: f64,
    /// Seconds before the first sample above −40 dBFS.
    pub lead_seconds: f64,
    /// Seconds after the last sample above −40 dBFS.
    pub tail_seconds: f64,
    pub seconds: f64,
    pub channels: u32,
    pub sample_rate: u32,
}

/// Measures interleaved PCM as it streams by.
pub struct Meter {
    ebu: EbuR128,
    channels: u32,
    rate: u32,
    sum_sq: f64,
    frames: u64,
    /// Per channel: the exponential RMS² and its minimum once the time constant has passed.
    avg_sq: Vec<f64>,
    min_sq: f64,
    mult: f64,
    settle: u64,
    edges: Edges,
}

/// Where the sound starts and ends in a stream: the frames before its first sample above
/// −40 dBFS and after its last (room tone is padded to what is missing).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Edges {
    frames: u64,
    first_loud: Option<u64>,
    last_loud: Option<u64>,
}

impl Edges {
    /// The next frame, `loud` when above the threshold.
    fn step(&mut self, loud: bool) {
        if loud {
            self.first_loud.get_or_insert(self.frames);
            self.last_loud = Some(self.frames);
        }
        self.frames += 1;
    }

    /// Adds mono 16-bit samples.
    pub fn add_i16(&mut self, pcm: &[i16]) {
        for &s in pcm {
            self.step(f64::from(s).abs() / 32768.0 > SOUND_THRESHOLD);
        }
    }

    /// (seconds before the first loud frame, seconds after the last) at `rate` Hz; all of it
    /// both ways when nothing is loud.
    pub fn seconds(&self, rate: u32) -> (f64, f64) {
        let rate = f64::from(rate);
        let all = self.frames as f64 / rate;
        (
            self.first_loud.map_or(all, |f| f as f64 / rate),
            self.last_loud
                .map_or(all, |l| (self.frames - l - 1) as f64 / rate),
        )
    }
}

impl Meter {
    /// A meter for `channels` interleaved channels at `rate` Hz; `None` for a rate or channel
    /// count BS.1770 cannot measure (none, or above 64 channels / 2.8 MHz).
    pub fn new(channels: u32, rate: u32) -> Option<Meter> {
        let ebu = EbuR128::new(channels, rate, Mode::I | Mode::TRUE_PEAK).ok()?;
        Some(Meter {
            ebu,
            channels,
            rate,
            sum_sq: 0.0,
            frames: 0,
            avg_sq: vec![0.0; channels as usize],
            min_sq: f64::MAX,
            mult: (-1.0 / (FLOOR_SECONDS * f64::from(rate))).exp(),
            settle: (FLOOR_SECONDS * f64::from(rate) + 0.5) as u64,
            edges: Edges::default(),
        })
    }

    /// Adds interleaved samples in −1..1 (a whole number of frames).
    pub fn add(&mut self, samples: &[f32]) {
        // Only a length that is not a whole number of frames fails, which callers never pass.
        let _ = self.ebu.add_frames_f32(samples);
        let ch = self.channels as usize;
        for frame in samples.chunks_exact(ch) {
            let mut loud = false;
            for (x, avg) in frame.iter().zip(self.avg_sq.iter_mut()) {
                let x = f64::from(*x);
                let sq = x * x;
                self.sum_sq += sq;
                *avg = *avg * self.mult + (1.0 - self.mult) * sq;
                if self.frames >= self.settle {
                    self.min_sq = self.min_sq.min(*avg);
                }
                loud |= x.abs() > SOUND_THRESHOLD;
            }
            self.edges.step(loud);
            self.frames += 1;
        }
    }

    /// Adds mono 16-bit samples (this meter must have one channel).
    pub fn add_i16(&mut self, pcm: &[i16]) {
        let f: Vec<f32> = pcm.iter().map(|&s| f32::from(s) / 32768.0).collect();
        self.add(&f);
    }

    pub fn figures(&self) -> Figures {
        let peak = |f: fn(&EbuR128, u32) -> Result<f64, ebur128::Error>| {
            (0..self.channels)
                .filter_map(|c| f(&self.ebu, c).ok())
                .fold(0.0, f64::max)
        };
        let seconds = self.frames as f64 / f64::from(self.rate);
        let (lead, tail) = self.edges.seconds(self.rate);
        let total = self.frames * u64::from(self.channels);
        let rms_sq = if total == 0 {
            0.0
        } else {
            self.sum_sq / total as f64
        };
        let floor_sq = if self.min_sq == f64::MAX {
            rms_sq
        } else {
            self.min_sq
        };
        Figures {
            integrated_lufs: clamp_db(self.ebu.loudness_global().unwrap_or(f64::NEG_INFINITY)),
            true_peak_db: amplitude_db(peak(EbuR128::true_peak)),
            sample_peak_db: amplitude_db(peak(EbuR128::sample_peak)),
            rms_db: power_db(rms_sq),
            noise_floor_db: power_db(floor_sq),
            lead_seconds: lead,
            tail_seconds: tail,
            seconds,
            channels: self.channels,
            sample_rate: self.rate,
        }
    }
}

fn clamp_db(db: f64) -> f64 {
    if db.is_finite() {
        db.max(SILENCE_DB)
    } else {
        SILENCE_DB
    }
}

fn amplitude_db(a: f64) -> f64 {
    clamp_db(20.0 * a.log10())
}

fn power_db(p: f64) -> f64 {
    clamp_db(10.0 * p.log10())
}

/// Brings a book to its standard: one gain for all of it, a lookahead limiter that holds sample
/// peaks under the standard's ceiling, and for ACX room tone (a seeded, quiet noise under all of
/// it, so no silence is digital) and padding at both ends.
///
/// The limiter: each sample's allowed gain `r` (1, or the ceiling over its level), the minimum
/// over the next `W` samples, a release that lets the gain recover over about 80 ms but never
/// above that minimum, then a `W`-sample moving average. Every average covers only minima that
/// include the sample itself, so no output sample exceeds the ceiling, and the gain changes
/// smoothly (no clicks). Output lags input by `W − 1` samples; [`Leveller::finish`] flushes them.
pub struct Leveller {
    gain: f32,
    ceiling: f32,
    window: usize,
    release: f32,
    /// Samples waiting for their lookahead (gain applied, limiter not yet).
    delay: std::collections::VecDeque<f32>,
    /// (index, allowed gain) of the sliding minimum, increasing gains.
    minima: std::collections::VecDeque<(u64, f32)>,
    /// The last `W` released minima and their sum.
    held: std::collections::VecDeque<f32>,
    held_sum: f64,
    released: f32,
    pushed: u64,
    noise: Option<(fastrand::Rng, f32)>,
    /// Room tone to write before the first sample, and after the last.
    lead: usize,
    tail: usize,
}

impl Leveller {
    /// `gain_db` for the whole book at `rate` Hz; `pad` (samples before, after) of room tone and
    /// `noise` (its level in dB RMS and seed) for ACX.
    pub fn new(
        standard: Standard,
        gain_db: f64,
        rate: u32,
        pad: (usize, usize),
        noise: Option<(f64, u64)>,
    ) -> Leveller {
        let window = (rate as usize * 5 / 1000).max(1);
        Leveller {
            gain: 10f64.powf(gain_db / 20.0) as f32,
            ceiling: 10f64.powf(standard.ceiling_db() / 20.0) as f32,
            window,
            release: 1.0 - (-1.0 / (0.08 * f64::from(rate))).exp() as f32,
            delay: std::collections::VecDeque::with_capacity(window),
            minima: std::collections::VecDeque::with_capacity(window),
            held: std::collections::VecDeque::with_capacity(window),
            held_sum: 0.0,
            released: 1.0,
            pushed: 0,
            noise: noise.map(|(db, seed)| {
                // Uniform noise in ±a has RMS a/√3.
                let a = 10f64.powf(db / 20.0) * 3f64.sqrt();
                (fastrand::Rng::with_seed(seed), a as f32)
            }),
            lead: pad.0,
            tail: pad.1,
        }
    }

    /// Levels `pcm`, appending what is ready (lagging by the lookahead) to `out`.
    pub fn push(&mut self, pcm: &[i16], out: &mut Vec<i16>) {
        for _ in 0..std::mem::take(&mut self.lead) {
            let s = self.tone();
            out.push(s);
        }
        for &s in pcm {
            self.step(f32::from(s) / 32768.0 * self.gain, out);
        }
    }

    /// The last lookahead's samples and the trailing room tone.
    pub fn finish(mut self, out: &mut Vec<i16>) {
        // `W − 1` zeros push the last real samples out; the zeros themselves are never output.
        if self.pushed > 0 {
            for _ in 1..self.window {
                self.step(0.0, out);
            }
        }
        for _ in 0..self.tail {
            let s = self.tone();
            out.push(s);
        }
    }

    fn step(&mut self, x: f32, out: &mut Vec<i16>) {
        let allowed = if x.abs() > self.ceiling {
            self.ceiling / x.abs()
        } else {
            1.0
        };
        let n = self.pushed;
        self.pushed += 1;
        while self.minima.back().is_some_and(|&(_, g)| g >= allowed) {
            self.minima.pop_back();
        }
        self.minima.push_back((n, allowed));
        self.delay.push_back(x);
        if self.delay.len() < self.window {
            return;
        }
        // The minimum over samples n-W+1..=n, for the sample W-1 back.
        while self
            .minima
            .front()
            .is_some_and(|&(i, _)| i + (self.window as u64) <= n)
        {
            self.minima.pop_front();
        }
        let lowest = self.minima.front().map_or(1.0, |&(_, g)| g);
        self.released = (self.released + (1.0 - self.released) * self.release).min(lowest);
        self.held.push_back(self.released);
        self.held_sum += f64::from(self.released);
        if self.held.len() > self.window {
            self.held_sum -= f64::from(self.held.pop_front().unwrap_or(1.0));
        }
        // Until W minima exist, the missing ones count as the first (a full gain at the start).
        let missing = self.window - self.held.len();
        let first = self.held.front().copied().unwrap_or(1.0);
        let g = (self.held_sum + missing as f64 * f64::from(first)) / self.window as f64;
        let y = self.delay.pop_front().unwrap_or(0.0) * g as f32;
        let y = y + self.noise_sample();
        out.push(to_i16(y));
    }

    fn noise_sample(&mut self) -> f32 {
        self.noise
            .as_mut()
            .map_or(0.0, |(rng, a)| (rng.f32() * 2.0 - 1.0) * *a)
    }

    fn tone(&mut self) -> i16 {
        let n = self.noise_sample();
        to_i16(n)
    }
}

fn to_i16(x: f32) -> i16 {
    (x * 32768.0).round().clamp(-32768.0, 32767.0) as i16
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sine(rate: u32, seconds: f64, amplitude: f64, hz: f64) -> Vec<i16> {
        (0..(seconds * f64::from(rate)) as usize)
            .map(|i| {
                let t = i as f64 / f64::from(rate);
                (amplitude * (2.0 * std::f64::consts::PI * hz * t).sin() * 32767.0).round() as i16
            })
            .collect()
    }

    #[test]
    fn a_full_scale_sine_measures_as_bs1770_says() {
        // BS.1770: a 997 Hz sine at 0 dBFS on one channel reads −3.01 LUFS; its RMS is −3.01 dB.
        let mut m = Meter::new(1, 48_000).unwrap();
        m.add_i16(&sine(48_000, 5.0, 1.0, 997.0));
        let f = m.figures();
        assert!((f.integrated_lufs + 3.01).abs() < 0.05, "{f:?}");
        assert!((f.rms_db + 3.01).abs() < 0.01, "{f:?}");
        assert!(f.sample_peak_db.abs() < 0.01, "{f:?}");
        // The running RMS starts from nothing: one time constant in, it holds 1 − 1/e of the
        // power, and that is its minimum (as in FFmpeg's astats).
        let settling = 10.0 * (0.5 * (1.0 - (-1f64).exp())).log10();
        assert!((f.noise_floor_db - settling).abs() < 0.05, "{f:?}");
        assert!(f.lead_seconds < 0.001, "{f:?}");
    }

    #[test]
    fn silence_reads_the_silence_figure_and_counts_as_room_tone() {
        let mut m = Meter::new(1, 22_050).unwrap();
        m.add_i16(&[0; 22_050]);
        let f = m.figures();
        assert_eq!(f.integrated_lufs, SILENCE_DB);
        assert_eq!(f.rms_db, SILENCE_DB);
        assert_eq!(f.lead_seconds, 1.0);
        assert_eq!(f.tail_seconds, 1.0);
    }

    #[test]
    fn the_limiter_holds_the_ceiling_keeps_the_length_and_leaves_quiet_parts() {
        let rate = 22_050;
        let mut pcm = sine(rate, 1.0, 0.1, 300.0);
        pcm.extend(sine(rate, 0.5, 1.0, 300.0));
        pcm.extend(sine(rate, 1.0, 0.1, 300.0));
        let mut l = Leveller::new(Standard::Podcast, 0.0, rate, (0, 0), None);
        let mut out = Vec::new();
        for part in pcm.chunks(1000) {
            l.push(part, &mut out);
        }
        l.finish(&mut out);
        assert_eq!(out.len(), pcm.len());
        let ceiling = 10f64.powf(Standard::Podcast.ceiling_db() / 20.0) * 32768.0;
        let peak = out
            .iter()
            .map(|s| f64::from(s.unsigned_abs()))
            .fold(0.0, f64::max);
        assert!(peak <= ceiling + 1.0, "{peak} > {ceiling}");
        assert!(peak > ceiling * 0.95, "the loud part was limited to {peak}");
        // The quiet start passes untouched (the limiter only acts near loud samples).
        assert_eq!(&out[..10_000], &pcm[..10_000]);
    }

    #[test]
    fn gain_padding_and_room_tone_for_acx() {
        let rate = 22_050;
        let pcm = sine(rate, 2.0, 0.05, 440.0);
        let mut meter = Meter::new(1, rate).unwrap();
        meter.add_i16(&pcm);
        let gain = Standard::Acx.gain_db(&meter.figures());
        let mut l = Leveller::new(
            Standard::Acx,
            gain,
            rate,
            (1000, 2000),
            Some((ROOM_TONE_DB, 7)),
        );
        let mut out = Vec::new();
        l.push(&pcm, &mut out);
        l.finish(&mut out);
        assert_eq!(out.len(), pcm.len() + 3000);
        assert!(
            out[..1000].iter().any(|&s| s != 0),
            "room tone is not digital silence"
        );
        let mut after = Meter::new(1, rate).unwrap();
        after.add_i16(&out[1000..out.len() - 2000]);
        assert!(
            (after.figures().rms_db + 20.0).abs() < 0.1,
            "{:?}",
            after.figures()
        );
        let mut tone = Meter::new(1, rate).unwrap();
        tone.add_i16(&out[..1000]);
        assert!(
            (tone.figures().rms_db - ROOM_TONE_DB).abs() < 1.5,
            "{:?}",
            tone.figures()
        );
    }

    #[test]
    fn rules_pass_and_fail_on_their_limits() {
        let f = Figures {
            integrated_lufs: -19.4,
            true_peak_db: -0.5,
            sample_peak_db: -3.5,
            rms_db: -20.0,
            noise_floor_db: -59.0,
            lead_seconds: 0.7,
            tail_seconds: 2.0,
            seconds: 10.0,
            channels: 1,
            sample_rate: 44_100,
        };
        let failed = |s: Standard| -> Vec<&str> {
            s.judge(&f)
                .iter()
                .filter(|c| !c.pass)
                .map(|c| c.name)
                .collect()
        };
        assert_eq!(failed(Standard::Acx), ["noise_floor"]);
        assert_eq!(failed(Standard::Podcast), ["true_peak"]);
        assert_eq!(failed(Standard::Broadcast), ["integrated", "true_peak"]);
    }
}
