//! Cover art: the EPUB's cover image or `--cover IMAGE`, carried from the book reader to the
//! muxer, which embeds it as an attached picture (MP4/M4B/M4A `covr`, MP3 ID3 `APIC`).
//!
//! Input: the image's bytes. Output: a [`Cover`] holding those very bytes (never re-encoded: the
//! publisher's JPEG or PNG is what players show), its kind and its size. Only JPEG and PNG, the
//! two kinds every player and store takes; the image is decoded in full once, so a truncated or
//! corrupt file fails here, before any synthesis, and not in a listener's player.
//! Limits: [`MAX_COVER_BYTES`] and [`MAX_COVER_SIDE`]. A larger cover is refused, not downscaled:
//! downscaling would re-encode the publisher's image behind their back, and the stores' own
//! limits (ACX 2400 px, Apple 3000–4000 px) lie well inside these; the message says how to shrink it.

use std::io::{Cursor, Read};
use std::path::Path;

use image::{ImageFormat, ImageReader, Limits};

/// Larger cover files are refused: ten times a store's full-size cover, and memory stays bounded.
pub const MAX_COVER_BYTES: u64 = 10 << 20;
/// Covers wider or taller than this are refused (a 4096×4096 cover decodes into 48 MiB).
pub const MAX_COVER_SIDE: u32 = 4096;

/// A checked cover image: the original bytes, embedded as they are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cover {
    pub bytes: Vec<u8>,
    /// PNG, else JPEG.
    pub png: bool,
    pub width: u32,
    pub height: u32,
}

impl Cover {
    /// Checks that `bytes` are a whole JPEG or PNG within the limits; the error says what is
    /// wrong with it (the caller names the file and the fix).
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Cover, String> {
        if bytes.len() as u64 > MAX_COVER_BYTES {
            return Err(format!(
                "is {} bytes, more than the {} MiB a cover may have",
                bytes.len(),
                MAX_COVER_BYTES >> 20
            ));
        }
        let format = image::guess_format(&bytes)
            .map_err(|_| "is not an image talker knows (not JPEG or PNG)".to_owned())?;
        let png = match format {
            ImageFormat::Png => true,
            ImageFormat::Jpeg => false,
            other => {
                return Err(format!(
                    "is a {} image; covers must be JPEG or PNG",
                    other
                        .extensions_str()
                        .first()
                        .unwrap_or(&"other")
                        .to_uppercase()
                ));
            }
        };
        let reader = || ImageReader::with_format(Cursor::new(bytes.as_slice()), format);
        let (width, height) = reader()
            .into_dimensions()
            .map_err(|e| format!("cannot be read as {}: {e}", kind(png)))?;
        if width.max(height) > MAX_COVER_SIDE {
            return Err(format!(
                "is {width}x{height} pixels, more than the {MAX_COVER_SIDE} a side a cover may have"
            ));
        }
        let mut limits = Limits::default();
        limits.max_image_width = Some(MAX_COVER_SIDE);
        limits.max_image_height = Some(MAX_COVER_SIDE);
        let mut decoder = reader();
        decoder.limits(limits);
        decoder
            .decode()
            .map_err(|e| format!("is not a whole {} image: {e}", kind(png)))?;
        Ok(Cover {
            bytes,
            png,
            width,
            height,
        })
    }

    /// `--cover IMAGE`: read (at most [`MAX_COVER_BYTES`] and one byte) and checked; the error
    /// names the file and the fix.
    pub fn read(path: &Path) -> Result<Cover, String> {
        let bad = |what: String| {
            format!(
                "--cover {}: {what}; give a JPEG or PNG image of at most {MAX_COVER_SIDE}x{MAX_COVER_SIDE} pixels and {} MiB (e.g. ffmpeg -i {} -vf scale=2400:-2 cover.jpg)",
                path.display(),
                MAX_COVER_BYTES >> 20,
                path.display()
            )
        };
        if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
            let what = match std::fs::metadata(path) {
                Err(e) => format!("cannot be read: {e}"),
                Ok(_) => "is not a regular file".to_owned(),
            };
            return Err(bad(what));
        }
        let mut bytes = Vec::new();
        std::fs::File::open(path)
            .and_then(|f| f.take(MAX_COVER_BYTES + 1).read_to_end(&mut bytes))
            .map_err(|e| bad(format!("cannot be read: {e}")))?;
        Cover::from_bytes(bytes).map_err(bad)
    }
}

fn kind(png: bool) -> &'static str {
    if png { "PNG" } else { "JPEG" }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(format: ImageFormat, w: u32, h: u32) -> Vec<u8> {
        let img = image::RgbImage::from_pixel(w, h, image::Rgb([200, 30, 60]));
        let mut out = Cursor::new(Vec::new());
        img.write_to(&mut out, format).unwrap();
        out.into_inner()
    }

    #[test]
    fn jpeg_and_png_are_kept_as_they_are() {
        let png = encoded(ImageFormat::Png, 40, 30);
        let c = Cover::from_bytes(png.clone()).unwrap();
        assert_eq!((c.png, c.width, c.height), (true, 40, 30));
        assert_eq!(c.bytes, png);
        let jpeg = encoded(ImageFormat::Jpeg, 16, 24);
        let c = Cover::from_bytes(jpeg.clone()).unwrap();
        assert_eq!((c.png, c.width, c.height), (false, 16, 24));
        assert_eq!(c.bytes, jpeg);
    }

    #[test]
    fn bad_covers_are_refused_with_the_reason() {
        assert!(
            Cover::from_bytes(b"not an image".to_vec())
                .unwrap_err()
                .contains("not JPEG or PNG")
        );
        let mut cut = encoded(ImageFormat::Png, 64, 64);
        cut.truncate(cut.len() / 2);
        assert!(Cover::from_bytes(cut).unwrap_err().contains("PNG"));
        let big = encoded(ImageFormat::Png, MAX_COVER_SIDE + 1, 1);
        assert!(Cover::from_bytes(big).unwrap_err().contains("4097x1"));
        let huge = vec![0u8; MAX_COVER_BYTES as usize + 1];
        assert!(Cover::from_bytes(huge).unwrap_err().contains("MiB"));
    }
}
