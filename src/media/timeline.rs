//! Chapters and subtitle cues of an output, timed on the sample clock of its audio as chunks are
//! laid end to end: the same for an MP4 and for audio-only outputs.

use super::{Chapter, Cue};

/// Collects chapter starts and cues chunk by chunk; [`Timeline::finish`] closes the chapters.
#[derive(Debug, Clone)]
pub struct Timeline {
    sample_rate: f64,
    /// Samples before the current chunk.
    offset: u64,
    starts: Vec<(String, f64)>,
    cues: Vec<Cue>,
}

impl Timeline {
    pub fn new(sample_rate: u32) -> Timeline {
        Timeline {
            sample_rate: f64::from(sample_rate),
            offset: 0,
            starts: Vec::new(),
            cues: Vec::new(),
        }
    }

    /// A chapter starting with the current chunk.
    pub fn chapter(&mut self, title: &str) {
        self.starts.push((title.to_owned(), self.seconds()));
    }

    /// A sentence of the current chunk, at sample span `(start, end)` inside it.
    pub fn cue(&mut self, text: &str, (start, end): (u64, u64)) {
        self.cues.push(Cue {
            text: text.to_owned(),
            start: (self.offset + start) as f64 / self.sample_rate,
            end: (self.offset + end) as f64 / self.sample_rate,
        });
    }

    /// The current chunk ends after `samples`; the next one starts there.
    pub fn advance(&mut self, samples: u64) {
        self.offset += samples;
    }

    /// Room tone of `lead` samples before everything laid out and `tail` after it: cues and
    /// chapters move by `lead`, except a chapter at the very start, which takes the room tone in.
    pub fn pad(&mut self, lead: u64, tail: u64) {
        let shift = lead as f64 / self.sample_rate;
        for (_, start) in &mut self.starts {
            if *start > 0.0 {
                *start += shift;
            }
        }
        for cue in &mut self.cues {
            cue.start += shift;
            cue.end += shift;
        }
        self.offset += lead + tail;
    }

    /// Seconds laid out so far.
    pub fn seconds(&self) -> f64 {
        self.offset as f64 / self.sample_rate
    }

    pub fn cues(&self) -> &[Cue] {
        &self.cues
    }

    /// The chapters, each ending where the next begins and the last at the end of the audio.
    pub fn chapters(&self) -> Vec<Chapter> {
        let total = self.seconds();
        self.starts
            .iter()
            .enumerate()
            .map(|(i, (title, start))| Chapter {
                title: title.clone(),
                start: *start,
                end: self.starts.get(i + 1).map_or(total, |n| n.1),
            })
            .collect()
    }

    /// Chapters and cues.
    pub fn finish(self) -> (Vec<Chapter>, Vec<Cue>) {
        (self.chapters(), self.cues)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chapters_end_where_the_next_begins() {
        let mut t = Timeline::new(100);
        t.chapter("One");
        t.cue("a", (10, 50));
        t.advance(200);
        t.chapter("Two");
        t.cue("b", (0, 100));
        t.advance(100);
        let (chapters, cues) = t.finish();
        assert_eq!(
            chapters
                .iter()
                .map(|c| (c.title.as_str(), c.start, c.end))
                .collect::<Vec<_>>(),
            [("One", 0.0, 2.0), ("Two", 2.0, 3.0)]
        );
        assert_eq!((cues[0].start, cues[0].end), (0.1, 0.5));
        assert_eq!((cues[1].start, cues[1].end), (2.0, 3.0));
    }

    #[test]
    fn room_tone_moves_all_but_the_first_chapter() {
        let mut t = Timeline::new(100);
        t.chapter("One");
        t.cue("a", (10, 50));
        t.advance(200);
        t.chapter("Two");
        t.advance(100);
        t.pad(50, 150);
        let (chapters, cues) = t.finish();
        assert_eq!(
            chapters
                .iter()
                .map(|c| (c.start, c.end))
                .collect::<Vec<_>>(),
            [(0.0, 2.5), (2.5, 5.0)]
        );
        assert_eq!((cues[0].start, cues[0].end), (0.6, 1.0));
    }
}
