//! Planner tests on Piper-shaped phone lists (`^`, one symbol per phone, `_` pad after each,
//! `$` at the end) built from real `espeak-ng -q --ipa -v en-us` output.

use super::*;

const RATE: u32 = 22050;

/// Typical Piper durations in seconds for a symbol.
fn dur_of(c: char) -> f64 {
    match c {
        '_' => 0.012,
        'ˈ' | 'ˌ' => 0.02,
        'ː' => 0.04,
        ' ' => 0.015,
        '^' | '$' => 0.05,
        ',' => 0.2,
        '.' | '!' | '?' => 0.45,
        c if matches!(ipa::classify(c), ipa::Symbol::Vowel(_)) => 0.085,
        _ => 0.06,
    }
}

/// Phones the way Piper's alignment gives them, with the duration of each symbol from `dur`.
fn piper_phones_with(ipa: &str, dur: impl Fn(char) -> f64) -> Vec<Phone> {
    let mut out = Vec::new();
    let mut t = 0.0f64;
    let mut push = |c: char, t: &mut f64| {
        let start = (*t * f64::from(RATE)).round() as u64;
        *t += dur(c);
        let end = (*t * f64::from(RATE)).round() as u64;
        out.push(Phone {
            ipa: c.to_string(),
            start,
            end,
        });
    };
    push('^', &mut t);
    push('_', &mut t);
    for c in ipa.chars() {
        push(c, &mut t);
        push('_', &mut t);
    }
    push('$', &mut t);
    out
}

fn piper_phones(ipa: &str) -> Vec<Phone> {
    piper_phones_with(ipa, dur_of)
}

/// Sentences as espeak-ng en-us phonemizes them.
const SENTENCES: [&str; 8] = [
    "ðə kwˈɪk bɹˈaʊn fˈɑːks dʒˈʌmps ˌoʊvɚ ðə lˈeɪzi dˈɑːɡ.",
    "həlˈoʊ, wˈɜːld!",
    "aɪm vˈɛɹi hˈæpi ɐbˌaʊt ðɪs θˈɪŋ.",
    "pˈæk maɪ bˈɑːks wɪð fˈaɪv dˈʌzən lˈɪkɚ dʒˈʌɡz.",
    "sˌʌm jˈɪɹz ɐɡˈoʊ nˈɛvɚ mˈaɪnd hˌaʊ lˈɔŋ pɹɪsˈaɪsli.",
    "mˈɛʒɚ plˈɛʒɚ, bˈʌʔn̩, ˈʌˈoʊ.",
    "wiː hæd ˈɛvɹɪθˌɪŋ bᵻfˈoːɹ ˌʌs.",
    "mˌiː mˈʌm pˈɑːpə bˈʌbəl.",
];

fn check_invariants(track: &MouthTrack, total: f64) {
    let keys = track.keys();
    assert!(!keys.is_empty());
    assert_eq!(keys[0].start, 0.0);
    assert!(
        (keys.last().unwrap().end - total).abs() < 1e-9,
        "track ends at {} not {total}",
        keys.last().unwrap().end
    );
    for w in keys.windows(2) {
        assert!((w[0].end - w[1].start).abs() < 1e-9, "gap/overlap {w:?}");
        assert!(
            !(w[0].kind == KeyKind::Tween && w[1].kind == KeyKind::Tween),
            "two tweens in a row"
        );
    }
    assert_ne!(keys[0].kind, KeyKind::Tween);
    let whole_is_short = total < MIN_SHAPE;
    for k in keys {
        assert!(k.end > k.start, "empty key {k:?}");
        assert_eq!(k.pose, k.pose.clamped(), "pose out of range {k:?}");
        match k.kind {
            KeyKind::Tween => {
                let d = k.end - k.start;
                assert!(
                    (TWEEN_MIN - 1e-9..=TWEEN_MAX + 1e-9).contains(&d),
                    "tween {d}"
                );
            }
            _ if !whole_is_short => assert!(
                k.end - k.start >= MIN_SHAPE - 1e-9,
                "held key shorter than {MIN_SHAPE}: {k:?}"
            ),
            _ => {}
        }
    }
}

fn total_of(phones: &[Phone]) -> f64 {
    phones
        .last()
        .map_or(0.0, |p| p.end as f64 / f64::from(RATE))
}

/// Sample ranges (seconds) of every phone whose symbol is in `set`.
fn spans(phones: &[Phone], set: &str) -> Vec<(f64, f64)> {
    phones
        .iter()
        .filter(|p| set.contains(p.ipa.as_str()))
        .map(|p| {
            (
                p.start as f64 / f64::from(RATE),
                p.end as f64 / f64::from(RATE),
            )
        })
        .collect()
}

#[test]
fn invariants_hold_on_real_sentences() {
    for s in SENTENCES {
        let phones = piper_phones(s);
        let track = plan(&phones, RATE);
        check_invariants(&track, total_of(&phones));
    }
}

#[test]
fn bilabials_close_fully_before_the_release() {
    for s in SENTENCES {
        let phones = piper_phones(s);
        let track = plan(&phones, RATE);
        for (i, p) in phones
            .iter()
            .enumerate()
            .filter(|(_, p)| "mbp".contains(&p.ipa))
        {
            let (start, end) = (
                p.start as f64 / f64::from(RATE),
                p.end as f64 / f64::from(RATE),
            );
            // A held, sealed key that overlaps the m/b/p and ends at its release: the start of
            // the next sound that is not a pad, a word space or another m/b/p (stress marks
            // belong to the vowel), give or take a tween carved from it.
            let release = phones[i..]
                .iter()
                .find(|q| !"_ mbp".contains(&q.ipa))
                .map_or(end, |q| q.start as f64 / f64::from(RATE));
            let closed = track.keys().iter().find(|k| {
                k.kind == KeyKind::Shape
                    && k.pose.open == 0.0
                    && k.start < end
                    && k.end > start
                    && k.end <= release + 1e-9
                    && k.end >= release - TWEEN_MAX
            });
            let k = closed.unwrap_or_else(|| panic!("no closure for m/b/p at {start} in {s}"));
            assert_eq!(k.viseme, Viseme::Pp);
            assert!(k.end - k.start >= MIN_SHAPE - 1e-9);
            let mid = 0.5 * (k.start + k.end);
            assert_eq!(track.pose_at(mid).open, 0.0);
        }
    }
}

#[test]
fn bilabial_closure_survives_fast_speech() {
    // Everything at 40 % of normal length: "mˈʌm" has 24 ms m's.
    let phones = piper_phones_with("mˌiː mˈʌm pˈɑːpə.", |c| 0.4 * dur_of(c));
    let track = plan(&phones, RATE);
    check_invariants(&track, total_of(&phones));
    for (start, end) in spans(&phones, "mp") {
        assert!(
            track
                .keys()
                .iter()
                .any(|k| k.pose.open == 0.0 && k.start < end && k.end > start),
            "closure lost at {start}"
        );
    }
}

#[test]
fn labiodentals_tuck_the_lower_lip() {
    let phones = piper_phones("fˈaɪv vˈɔɪs, ˈɔf.");
    let track = plan(&phones, RATE);
    check_invariants(&track, total_of(&phones));
    for (start, end) in spans(&phones, "fv") {
        let k = track
            .keys()
            .iter()
            .find(|k| {
                k.kind == KeyKind::Shape && k.viseme == Viseme::Ff && k.start < end && k.end > start
            })
            .unwrap_or_else(|| panic!("no f/v shape at {start}"));
        assert_eq!(k.pose.lower_lip_tuck, 1.0);
        assert!(k.pose.teeth > 0.5 && k.pose.upper_lip > 0.3);
    }
}

/// "hello" + a pause of `pause` seconds + "world".
fn with_pause(pause: f64) -> (Vec<Phone>, (f64, f64)) {
    let phones = piper_phones_with("həlˈoʊ, wˈɜːld.", |c| {
        if c == ',' { pause } else { dur_of(c) }
    });
    let span = spans(&phones, ",")[0];
    (phones, span)
}

#[test]
fn long_pause_returns_to_rest() {
    let (phones, (a, b)) = with_pause(0.6);
    let track = plan(&phones, RATE);
    check_invariants(&track, total_of(&phones));
    let rest = track.keys().iter().find(|k| {
        k.kind == KeyKind::Shape
            && k.viseme == Viseme::Sil
            && k.pose == MouthPose::REST
            && k.start < b
            && k.end > a
    });
    let rest = rest.expect("no rest key in a 600 ms pause");
    assert!(rest.end - rest.start > 0.3);
    assert_eq!(track.pose_at(0.5 * (a + b)), MouthPose::REST);
}

#[test]
fn medium_pause_relaxes_and_short_pause_holds() {
    let (phones, (a, b)) = with_pause(0.2);
    let track = plan(&phones, RATE);
    check_invariants(&track, total_of(&phones));
    let relax = track
        .keys()
        .iter()
        .find(|k| k.kind == KeyKind::Relax && k.start < b && k.end > a)
        .expect("no relax key in a 200 ms pause");
    // Halfway between the "o ʊ" shape and rest.
    assert!(relax.pose.open > 0.0 && relax.pose.open < Viseme::Ou.pose().open);

    let (phones, (a, b)) = with_pause(0.06);
    let track = plan(&phones, RATE);
    check_invariants(&track, total_of(&phones));
    let mid = 0.5 * (a + b);
    assert!(
        track.keys().iter().all(|k| !(k.kind == KeyKind::Relax
            || k.viseme == Viseme::Sil && k.start < mid && k.end > mid)),
        "a 60 ms pause must hold the shape"
    );
    assert_ne!(track.pose_at(mid), MouthPose::REST);
}

#[test]
fn vowels_are_anticipated_after_tongue_consonants() {
    // "dɑː": the ɑ shape must start before the ɑ sound.
    let phones = piper_phones("dˈɑːd.");
    let track = plan(&phones, RATE);
    let vowel_start = spans(&phones, "ɑ")[0].0;
    // Stress mark time belongs to the vowel, so the sound starts at the stress mark.
    let stress_start = spans(&phones, "ˈ")[0].0;
    let k = track
        .keys()
        .iter()
        .find(|k| k.viseme == Viseme::Aa && k.kind == KeyKind::Shape)
        .expect("no AA shape");
    assert!(k.start < stress_start.min(vowel_start), "{k:?}");
    // The tween into it starts even earlier.
    let tween_start = track
        .keys()
        .iter()
        .find(|t| t.kind == KeyKind::Tween && t.viseme == Viseme::Aa)
        .map_or(k.start, |t| t.start);
    assert!(tween_start < stress_start - 0.02);
}

#[test]
fn stress_opens_the_mouth_wider() {
    let track = plan(&piper_phones("dˈɑːdɑːd."), RATE);
    let opens: Vec<f32> = track
        .keys()
        .iter()
        .filter(|k| k.viseme == Viseme::Aa && k.kind == KeyKind::Shape)
        .map(|k| k.pose.open)
        .collect();
    assert_eq!(opens.len(), 2, "{:?}", track.keys());
    assert!(opens[0] > opens[1]);
}

#[test]
fn plan_is_deterministic() {
    for s in SENTENCES {
        let a = plan(&piper_phones(s), RATE);
        let b = plan(&piper_phones(s), RATE);
        assert_eq!(a, b);
        let ta: Vec<MouthPose> = (0..200).map(|i| a.pose_at(f64::from(i) * 0.013)).collect();
        let tb: Vec<MouthPose> = (0..200).map(|i| b.pose_at(f64::from(i) * 0.013)).collect();
        assert_eq!(ta, tb);
    }
}

#[test]
fn pose_is_continuous_inside_tweens_and_eases_out() {
    let phones = piper_phones(SENTENCES[0]);
    let track = plan(&phones, RATE);
    for k in track.keys().iter().filter(|k| k.kind == KeyKind::Tween) {
        let n = 20;
        let mut prev = track.pose_at(k.start);
        for i in 1..=n {
            let t = k.start + (k.end - k.start) * f64::from(i) / f64::from(n);
            let p = track.pose_at(t.min(k.end - 1e-9));
            assert!(prev.distance(&p) < 0.2, "jump inside tween at {t}");
            prev = p;
        }
    }
    let end = track.duration();
    assert_eq!(track.pose_at(end + 1.0), MouthPose::REST);
    assert_eq!(track.pose_at(-1.0), track.keys()[0].pose);
}

#[test]
fn odd_input_gives_a_valid_track() {
    assert_eq!(plan(&[], RATE).pose_at(0.3), MouthPose::REST);
    assert_eq!(plan(&[], RATE).duration(), 0.0);
    let p = |ipa: &str, start, end| Phone {
        ipa: ipa.into(),
        start,
        end,
    };
    // Backwards, overlapping, gapped, empty, unknown and multi-letter phones, rate 0.
    let odd = vec![
        p("ˈ", 0, 100),
        p("", 100, 300),
        p("aɪ", 300, 5000),
        p("m", 4000, 3000),
        p("☃", 9000, 12000),
        p("tʃˈuː", 12000, 15000),
        p("ː", 15000, 15000),
        p("ˈ", 15000, 15100),
    ];
    for rate in [RATE, 0, 1] {
        let track = plan(&odd, rate);
        let total = 15100.0 / f64::from(rate.max(1));
        check_invariants(&track, total);
        assert!(track.pose_at(0.1).open.is_finite());
    }
    // Everything shorter than one shape: one key.
    let tiny = plan(&[p("a", 0, 100)], RATE);
    assert_eq!(tiny.keys().len(), 1);
}

#[test]
fn random_phone_lists_keep_the_invariants() {
    let symbols: Vec<char> = "^$_ ,.ˈˌːabdefhijklmnoprstuvwzæðŋɑɐɔəɚɛɜɡɪɹɾʃʊʌʒʔθᵻ"
        .chars()
        .collect();
    let mut rng = fastrand::Rng::with_seed(7);
    for _ in 0..300 {
        let n = rng.usize(0..60);
        let mut t = 0u64;
        let phones: Vec<Phone> = (0..n)
            .map(|_| {
                let start = t;
                t += rng.u64(0..6000);
                Phone {
                    ipa: symbols[rng.usize(..symbols.len())].to_string(),
                    start,
                    end: t,
                }
            })
            .collect();
        let track = plan(&phones, RATE);
        if n > 0 && t > 0 {
            check_invariants(&track, t as f64 / f64::from(RATE));
        }
    }
}

#[test]
fn stressed_vowels_keep_their_opening_at_normal_and_brisk_rates() {
    for speed in [0.8, 1.0, 1.3] {
        for s in SENTENCES {
            let phones = piper_phones_with(s, |c| speed * dur_of(c));
            let track = plan(&phones, RATE);
            for (i, p) in phones.iter().enumerate().filter(|(_, p)| p.ipa == "ˈ") {
                // The stress mark, its pad, then the vowel.
                let v = &phones[i + 2];
                let (a, b) = (
                    p.start as f64 / f64::from(RATE),
                    v.end as f64 / f64::from(RATE),
                );
                assert!(
                    track
                        .keys()
                        .iter()
                        .any(|k| k.pose.open >= 0.2 && k.start < b && k.end > a),
                    "stressed {} lost in {s} at speed {speed}",
                    v.ipa
                );
            }
        }
    }
}

/// Real Piper timings (see the fixture's note).
fn piper_fixture() -> Vec<(String, u32, Vec<Phone>)> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/lipsync/piper-joe-phones.json"
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("json");
    v["utterances"]
        .as_array()
        .expect("utterances")
        .iter()
        .map(|u| {
            let phones = u["phones"]
                .as_array()
                .expect("phones")
                .iter()
                .map(|p| Phone {
                    ipa: p[0].as_str().expect("ipa").to_string(),
                    start: p[1].as_u64().expect("start"),
                    end: p[2].as_u64().expect("end"),
                })
                .collect();
            let rate = u["sample_rate"].as_u64().expect("rate") as u32;
            (u["text"].as_str().expect("text").to_string(), rate, phones)
        })
        .collect()
}

#[test]
fn real_piper_timings_keep_every_rule() {
    for (text, rate, phones) in piper_fixture() {
        let track = plan(&phones, rate);
        let secs = |s: u64| s as f64 / f64::from(rate);
        check_invariants(&track, secs(phones.last().expect("phones").end));
        for (i, p) in phones.iter().enumerate() {
            let (start, end) = (secs(p.start), secs(p.end));
            let overlapping =
                |k: &&VisemeKey| k.kind == KeyKind::Shape && k.start < end && k.end > start;
            match p.ipa.as_str() {
                "m" | "b" | "p" => {
                    // Sealed before the release: the start of the next sound that is not
                    // another m/b/p or a word space.
                    let release = phones[i..]
                        .iter()
                        .find(|q| !" mbp".contains(&q.ipa))
                        .map_or(end, |q| secs(q.start));
                    let k = track
                        .keys()
                        .iter()
                        .find(|k| overlapping(k) && k.pose.open == 0.0)
                        .unwrap_or_else(|| panic!("{text}: no closure for {} at {start}", p.ipa));
                    // (A closure at the very start cannot borrow before 0 s and may end a
                    // few ms late.)
                    assert!(
                        k.end <= release + 0.005 && k.end >= release - TWEEN_MAX,
                        "{text}: {k:?} vs release {release}"
                    );
                }
                "f" | "v" => {
                    assert!(
                        track
                            .keys()
                            .iter()
                            .filter(overlapping)
                            .any(|k| k.pose.lower_lip_tuck == 1.0),
                        "{text}: no lip tuck for {} at {start}",
                        p.ipa
                    );
                }
                _ => {}
            }
        }
    }
}

/// Found by the fuzzer: phone times of ~10⁸ s (huge sample indices at a tiny rate) lose the
/// sub-ns precision the minimum-length pass relied on, and it never finished.
#[test]
fn huge_sample_indices_finish() {
    let p = |ipa: &str, start, end| Phone {
        ipa: ipa.into(),
        start,
        end,
    };
    // The fuzzer's input: one 56-million-second phone, then empty unknown symbols.
    let mut phones = vec![p("ʈ", 1_090_465_498, 4_294_967_293)];
    phones.extend((0..7).map(|_| p("\u{FFFD}", 4_294_967_295, 4_294_967_295)));
    let track = plan(&phones, 57);
    let keys = track.keys();
    assert!(!keys.is_empty());
    for w in keys.windows(2) {
        assert_eq!(w[0].end, w[1].start);
    }
}
