//! `talker audio check`: measure files against a publishing standard.

use talker::media::loudness::{Criterion, Figures, Standard};
use talker::media::measure_file;
use talker::{Error, Result};

use super::args::{CheckArgs, StandardArg};
use super::common::Global;
use super::ui::print_result;

/// One file's verdict.
#[derive(serde::Serialize)]
struct Checked<'a> {
    file: &'a std::path::Path,
    standard: Standard,
    pass: bool,
    criteria: Vec<Criterion>,
    figures: Figures,
}

pub fn run_check(args: &CheckArgs, global: &Global) -> Result<()> {
    let standard = match args.standard {
        StandardArg::Acx => Standard::Acx,
        StandardArg::Podcast => Standard::Podcast,
        StandardArg::Broadcast => Standard::Broadcast,
    };
    // Every path checked before any is decoded.
    for file in &args.files {
        if !file.is_file() {
            return Err(Error::Usage(format!(
                "{}: no such audio file; give the path of an audio file to measure",
                file.display()
            )));
        }
    }
    let mut checked = Vec::with_capacity(args.files.len());
    for file in &args.files {
        let figures = measure_file(file).map_err(|e| {
            Error::Usage(format!(
                "{e}; give an audio file FFmpeg can decode (MP3, M4B, WAV, FLAC, ...)"
            ))
        })?;
        let criteria = standard.judge(&figures);
        checked.push(Checked {
            file,
            standard,
            pass: criteria.iter().all(|c| c.pass),
            criteria,
            figures,
        });
    }
    if global.json {
        let v = serde_json::json!({ "standard": standard, "files": checked });
        print_result(&v.to_string(), || "the measurements".to_owned())?;
    } else {
        let mut text = String::new();
        for c in &checked {
            text += &format!(
                "{}: {} ({})\n",
                c.file.display(),
                if c.pass { "pass" } else { "FAIL" },
                standard.name()
            );
            for r in &c.criteria {
                text += &format!(
                    "  {:<16} {:>9.2} {:<5} {:<12} {}\n",
                    r.name,
                    r.value,
                    r.unit,
                    r.rule,
                    if r.pass { "pass" } else { "FAIL" }
                );
            }
            let f = &c.figures;
            text += &format!(
                "  ({:.1} s; {:.2} LUFS integrated, true peak {:.2} dBTP, peak {:.2} dBFS, RMS {:.2} dB, noise floor {:.2} dB)\n",
                f.seconds,
                f.integrated_lufs,
                f.true_peak_db,
                f.sample_peak_db,
                f.rms_db,
                f.noise_floor_db
            );
        }
        if !global.quiet {
            print_result(text.trim_end(), || "the measurements".to_owned())?;
        }
    }
    let failed = checked.iter().filter(|c| !c.pass).count();
    if failed > 0 {
        return Err(Error::CheckFailed {
            failed,
            total: checked.len(),
            standard: standard.name(),
        });
    }
    Ok(())
}
