//! Opening the portrait photo.
//!
//! Input: a path to a PNG or JPEG file. Output: an 8-bit RGB image, upright. Invariants: the
//! format is recognised from the file's content (not its name); EXIF orientation is applied;
//! grayscale and 16-bit images are converted, alpha is composited over white (a transparent
//! background should look like paper, not like a black hole); sides are 64..=8192 px, checked
//! before the pixels are decoded so that a huge file cannot exhaust memory.

use std::fs::File;
use std::io::{Cursor, ErrorKind, Read};
use std::path::{Path, PathBuf};

use image::{DynamicImage, ImageDecoder, ImageFormat, ImageReader, RgbImage};

use super::FaceError;

/// The smallest side a portrait may have; below it no face can be large enough to animate.
pub const MIN_SIDE: u32 = 64;
/// The largest side a portrait may have; above it decoding would need gigabytes.
pub const MAX_SIDE: u32 = 8192;

/// A decoded, upright RGB portrait and where it came from.
#[derive(Debug, Clone)]
pub struct Portrait {
    pub image: RgbImage,
    pub path: PathBuf,
}

impl Portrait {
    pub fn open(path: &Path) -> Result<Portrait, FaceError> {
        let owned = || path.to_path_buf();
        let file = File::open(path).map_err(|e| match e.kind() {
            ErrorKind::NotFound => FaceError::PortraitMissing { path: owned() },
            _ => FaceError::PortraitUnreadable {
                path: owned(),
                reason: e.to_string(),
            },
        })?;
        let mut bytes = Vec::new();
        (&file)
            .read_to_end(&mut bytes)
            .map_err(|e| FaceError::PortraitUnreadable {
                path: owned(),
                reason: e.to_string(),
            })?;
        // The format comes from the magic bytes, not the name.
        let reader = ImageReader::new(Cursor::new(&bytes[..]))
            .with_guessed_format()
            .map_err(|e| FaceError::PortraitUnreadable {
                path: owned(),
                reason: e.to_string(),
            })?;
        match reader.format() {
            None => return Err(FaceError::NotAnImage { path: owned() }),
            Some(ImageFormat::Png | ImageFormat::Jpeg) => {}
            Some(other) => {
                return Err(FaceError::UnsupportedFormat {
                    path: owned(),
                    format: format_name(other),
                });
            }
        }
        let corrupt = |e: image::ImageError| FaceError::PortraitCorrupt {
            path: owned(),
            reason: e.to_string(),
        };
        // The JPEG decoder fills what a cut-off file lacks with grey instead of failing.
        if reader.format() == Some(ImageFormat::Jpeg) && !jpeg_is_complete(&bytes) {
            return Err(FaceError::PortraitCorrupt {
                path: owned(),
                reason: "the JPEG data ends before its end-of-image marker".into(),
            });
        }
        let mut decoder = reader.into_decoder().map_err(corrupt)?;
        let (width, height) = decoder.dimensions();
        if width.max(height) > MAX_SIDE {
            return Err(FaceError::PortraitTooLarge {
                path: owned(),
                width,
                height,
            });
        }
        if width.min(height) < MIN_SIDE {
            return Err(FaceError::PortraitTooSmall {
                path: owned(),
                width,
                height,
            });
        }
        let orientation = decoder.orientation().map_err(corrupt)?;
        let mut decoded = DynamicImage::from_decoder(decoder).map_err(corrupt)?;
        decoded.apply_orientation(orientation);
        Ok(Portrait {
            image: to_rgb_over_white(&decoded),
            path: owned(),
        })
    }
}

/// A format's name as people know it, for the message that it is not supported.
fn format_name(format: ImageFormat) -> &'static str {
    match format {
        ImageFormat::Gif => "GIF",
        ImageFormat::WebP => "WebP",
        ImageFormat::Bmp => "BMP",
        ImageFormat::Tiff => "TIFF",
        ImageFormat::Avif => "AVIF",
        ImageFormat::Ico => "ICO",
        other => other.extensions_str().first().copied().unwrap_or("another"),
    }
}

/// Whether a JPEG's markers run from its start to its end-of-image marker. Segments are skipped
/// by their lengths (so a thumbnail's own end marker inside EXIF does not count) and entropy-coded
/// data up to the next marker that is neither a stuffed 0xFF nor a restart; trailing bytes after
/// the end marker (some cameras append a video) are fine.
fn jpeg_is_complete(data: &[u8]) -> bool {
    if !data.starts_with(&[0xFF, 0xD8]) {
        return false;
    }
    let mut i = 2;
    loop {
        // A marker: 0xFF (fill bytes may repeat it), then its code.
        let start = i;
        while data.get(i) == Some(&0xFF) {
            i += 1;
        }
        if i == start {
            return false;
        }
        let Some(&code) = data.get(i) else {
            return false;
        };
        i += 1;
        match code {
            0xD9 => return true,
            0x01 | 0xD0..=0xD7 => continue,
            _ => {}
        }
        let Some(len) = data
            .get(i..i + 2)
            .map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
        else {
            return false;
        };
        if len < 2 || i + len > data.len() {
            return false;
        }
        i += len;
        if code == 0xDA {
            // Scan data: up to a 0xFF that starts a real marker.
            loop {
                match (data.get(i), data.get(i + 1)) {
                    (Some(0xFF), Some(0x00 | 0xD0..=0xD7)) => i += 2,
                    (Some(0xFF), Some(_)) => break,
                    (Some(_), _) => i += 1,
                    (None, _) => return false,
                }
            }
        }
    }
}

/// Converts any decoded image to RGB8, compositing transparency over white.
pub fn to_rgb_over_white(img: &DynamicImage) -> RgbImage {
    if !img.color().has_alpha() {
        return img.to_rgb8();
    }
    let rgba = img.to_rgba8();
    RgbImage::from_fn(rgba.width(), rgba.height(), |x, y| {
        let [r, g, b, a] = rgba.get_pixel(x, y).0;
        let over = |c: u8| {
            let (c, a) = (u32::from(c), u32::from(a));
            ((c * a + 255 * (255 - a) + 127) / 255) as u8
        };
        image::Rgb([over(r), over(g), over(b)])
    })
}

/// A background or slide: PNG or JPEG only, at most [`MAX_SIDE`] a side as a portrait (so a huge
/// image cannot exhaust memory), decoded; `bad` words a refusal for where the picture came from.
pub fn decode_picture<R: std::io::BufRead + std::io::Seek, E>(
    reader: image::ImageReader<R>,
    bad: impl Fn(String) -> E,
) -> Result<image::RgbImage, E> {
    let mut reader = reader
        .with_guessed_format()
        .map_err(|e| bad(format!("cannot be read ({e})")))?;
    if !matches!(
        reader.format(),
        Some(image::ImageFormat::Png | image::ImageFormat::Jpeg)
    ) {
        return Err(bad("is neither PNG nor JPEG".to_owned()));
    }
    let mut limits = image::Limits::default();
    limits.max_image_width = Some(MAX_SIDE);
    limits.max_image_height = Some(MAX_SIDE);
    reader.limits(limits);
    let img = reader.decode().map_err(|e| {
        bad(format!(
            "cannot be decoded ({e}; at most {MAX_SIDE} pixels a side)"
        ))
    })?;
    Ok(img.to_rgb8())
}

#[cfg(test)]
mod tests {
    use super::*;
    use image::{ImageFormat, Luma, LumaA, Rgba};

    fn dir() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    #[test]
    fn opens_the_example_portrait() {
        let p = Portrait::open(Path::new("examples/portrait.png")).unwrap();
        assert_eq!(p.image.dimensions(), (512, 512));
        assert_eq!(p.path, Path::new("examples/portrait.png"));
    }

    #[test]
    fn converts_gray_16_bit_and_alpha() {
        let d = dir();
        let gray = d.path().join("gray.png");
        image::ImageBuffer::from_pixel(64, 64, Luma([1000u16]))
            .save(&gray)
            .unwrap();
        let p = Portrait::open(&gray).unwrap();
        assert_eq!(p.image.get_pixel(0, 0).0, [4, 4, 4]);
        let alpha = d.path().join("alpha.png");
        image::RgbaImage::from_pixel(64, 64, Rgba([0, 0, 0, 0]))
            .save(&alpha)
            .unwrap();
        assert_eq!(
            Portrait::open(&alpha).unwrap().image.get_pixel(3, 3).0,
            [255; 3]
        );
        let half = DynamicImage::ImageLumaA8(image::ImageBuffer::from_pixel(1, 1, LumaA([0, 128])));
        assert_eq!(to_rgb_over_white(&half).get_pixel(0, 0).0, [127; 3]);
    }

    #[test]
    fn opens_jpeg_and_applies_exif_orientation() {
        let d = dir();
        let path = d.path().join("wide.jpg");
        let mut img = RgbImage::from_pixel(96, 64, image::Rgb([200, 200, 200]));
        img.put_pixel(0, 0, image::Rgb([0, 0, 0]));
        let mut jpeg = Vec::new();
        DynamicImage::ImageRgb8(img)
            .write_to(&mut std::io::Cursor::new(&mut jpeg), ImageFormat::Jpeg)
            .unwrap();
        std::fs::write(&path, &jpeg).unwrap();
        assert_eq!(Portrait::open(&path).unwrap().image.dimensions(), (96, 64));
        // Insert an APP1 Exif segment with Orientation = 6 (rotate 90° clockwise) after SOI.
        let exif: Vec<u8> = [
            &b"Exif\0\0II*\0"[..],
            &8u32.to_le_bytes(),
            &1u16.to_le_bytes(),
            &0x0112u16.to_le_bytes(),
            &3u16.to_le_bytes(),
            &1u32.to_le_bytes(),
            &6u16.to_le_bytes(),
            &[0, 0],
            &0u32.to_le_bytes(),
        ]
        .concat();
        let mut rotated = jpeg[..2].to_vec();
        rotated.extend_from_slice(&[0xFF, 0xE1]);
        rotated.extend_from_slice(&((exif.len() + 2) as u16).to_be_bytes());
        rotated.extend_from_slice(&exif);
        rotated.extend_from_slice(&jpeg[2..]);
        std::fs::write(&path, &rotated).unwrap();
        let p = Portrait::open(&path).unwrap();
        assert_eq!(p.image.dimensions(), (64, 96));
        // The dark top-left corner moves to the top-right after a clockwise quarter turn.
        assert!(p.image.get_pixel(63, 0).0[0] < 100);
        assert!(p.image.get_pixel(0, 0).0[0] > 150);
    }

    #[test]
    fn size_limits_are_enforced() {
        let d = dir();
        let small = d.path().join("small.png");
        RgbImage::new(63, 200).save(&small).unwrap();
        assert!(matches!(
            Portrait::open(&small),
            Err(FaceError::PortraitTooSmall {
                width: 63,
                height: 200,
                ..
            })
        ));
        // A valid PNG header claiming 9000 x 64 pixels is refused before its pixels are read.
        let large = d.path().join("large.png");
        let mut ihdr = b"IHDR".to_vec();
        ihdr.extend_from_slice(&9000u32.to_be_bytes());
        ihdr.extend_from_slice(&64u32.to_be_bytes());
        ihdr.extend_from_slice(&[8, 0, 0, 0, 0]);
        let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
        for chunk in [&ihdr[..], b"IDAT\x78\x01", b"IEND"] {
            png.extend_from_slice(&(chunk.len() as u32 - 4).to_be_bytes());
            png.extend_from_slice(chunk);
            png.extend_from_slice(&crc32fast::hash(chunk).to_be_bytes());
        }
        std::fs::write(&large, &png).unwrap();
        let err = Portrait::open(&large).unwrap_err();
        assert!(
            matches!(err, FaceError::PortraitTooLarge { width: 9000, .. }),
            "{err}"
        );
    }
}
