//! Cue preparation and the SRT sidecar.

use super::super::subtitles::{TimedText, prepare_cues};
use super::super::{Cue, MediaError, srt_text, write_srt};
use super::{assert_step, entries, temp};

fn cue(text: &str, start: f64, end: f64) -> Cue {
    Cue {
        text: text.into(),
        start,
        end,
    }
}

#[test]
fn cues_are_sorted_clipped_and_empty_ones_dropped() {
    let cues = [
        cue("third", 5.0, 6.0),
        cue("first", 0.0, 2.5),
        cue("second", 2.0, 4.0),
        cue("  \n \n", 4.5, 4.9),
        cue("zero", 7.0, 7.0),
    ];
    let timed = prepare_cues(&cues).expect("valid");
    let t = |text: &str, start_ms, end_ms| TimedText {
        start_ms,
        end_ms,
        text: text.into(),
    };
    assert_eq!(
        timed,
        [
            t("first", 0, 2000),
            t("second", 2000, 4000),
            t("third", 5000, 6000)
        ]
    );
}

#[test]
fn srt_text_uses_subrip_times_and_drops_blank_lines() {
    let srt = srt_text(&[
        cue("Line one\n\n  line two  ", 3661.001, 3662.5),
        cue("Start", 0.0, 0.25),
    ])
    .expect("valid");
    assert_eq!(
        srt,
        "1\n00:00:00,000 --> 00:00:00,250\nStart\n\n\
         2\n01:01:01,001 --> 01:01:02,500\nLine one\nline two\n\n"
    );
}

#[test]
fn write_srt_is_atomic_and_reports_bad_cues() {
    let (dir, path) = temp("out.srt");
    write_srt(&path, &[cue("Hi", 1.0, 2.0)]).expect("write");
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "1\n00:00:01,000 --> 00:00:02,000\nHi\n\n"
    );
    let err = write_srt(&path, &[cue("bad", f64::INFINITY, 2.0)]).expect_err("infinite");
    assert!(matches!(err, MediaError::InvalidMeta(_)), "{err}");
    let err = write_srt(&dir.path().join("no").join("x.srt"), &[]).expect_err("no dir");
    assert_step(&err, "write srt", false);
    assert_eq!(entries(dir.path()), ["out.srt"]);
}
