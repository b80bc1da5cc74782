//! face-api's 68-point landmark net and the [`Landmarks`] it produces.
//!
//! Input: an RGB image and a face box in image pixels. Output: 68 points in the iBUG 300-W
//! layout, in image pixels. Invariants, as in face-api 1.7.15: the box is clipped to the image
//! and floored to whole pixels, that crop is zero-padded to a centred square and resized
//! (TensorFlow legacy bilinear) to 112×112; the net (four dense blocks of separable convolutions,
//! 7×7 average pool, fully connected 256 → 136) gives (x, y) pairs relative to that square, which
//! are mapped back through the exact padding and crop offsets.

use std::collections::HashMap;
use std::ops::Range;

use image::RgbImage;

use super::layers::{Conv3x3, SeparableConv};
use super::ops::{self, FeatureMap, Pad};
use super::tfjs_weights::{Tensor, WeightsError, take};

const INPUT_SIZE: usize = 112;
const MEAN_RGB: [f32; 3] = [122.782, 117.001, 104.298];

/// 68 facial landmarks in image pixel coordinates, iBUG 300-W order: jaw 0..17, brows 17..27,
/// nose 27..36, eyes 36..48, outer lip 48..60, inner lip 60..68. "Left" and "right" mean the
/// image's left and right (the subject's right and left).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Landmarks {
    pub points: [[f32; 2]; 68],
}

/// Which eye: as seen in the image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Eye {
    Left,
    Right,
}

impl Landmarks {
    const JAW: Range<usize> = 0..17;
    const NOSE: Range<usize> = 27..36;
    pub const LEFT_EYE: Range<usize> = 36..42;
    pub const RIGHT_EYE: Range<usize> = 42..48;
    const MOUTH_OUTER: Range<usize> = 48..60;
    const MOUTH_INNER: Range<usize> = 60..68;
    /// Mouth corners on the outer lip contour (image left, image right).
    pub const MOUTH_CORNERS: [usize; 2] = [48, 54];

    pub fn jaw(&self) -> &[[f32; 2]] {
        &self.points[Self::JAW]
    }

    pub fn nose(&self) -> &[[f32; 2]] {
        &self.points[Self::NOSE]
    }

    pub fn mouth_outer(&self) -> &[[f32; 2]] {
        &self.points[Self::MOUTH_OUTER]
    }

    pub fn mouth_inner(&self) -> &[[f32; 2]] {
        &self.points[Self::MOUTH_INNER]
    }

    pub fn left_eye(&self) -> &[[f32; 2]] {
        &self.points[Self::LEFT_EYE]
    }

    pub fn right_eye(&self) -> &[[f32; 2]] {
        &self.points[Self::RIGHT_EYE]
    }

    pub fn eye(&self, eye: Eye) -> &[[f32; 2]] {
        match eye {
            Eye::Left => self.left_eye(),
            Eye::Right => self.right_eye(),
        }
    }

    /// Mean of the six contour points of one eye.
    pub fn eye_centre(&self, eye: Eye) -> [f32; 2] {
        centroid(self.eye(eye))
    }

    /// Mean of the twelve outer-lip points.
    pub fn mouth_centre(&self) -> [f32; 2] {
        centroid(self.mouth_outer())
    }

    /// The two mouth corners, image left then image right.
    pub fn mouth_corners(&self) -> [[f32; 2]; 2] {
        Self::MOUTH_CORNERS.map(|i| self.points[i])
    }

    /// Distance between the two eye centres, the usual scale of a face.
    pub fn inter_ocular(&self) -> f32 {
        let [l, r] = [Eye::Left, Eye::Right].map(|e| self.eye_centre(e));
        (l[0] - r[0]).hypot(l[1] - r[1])
    }

    /// Head roll in radians: the angle of the line from the left to the right eye centre
    /// (positive when the right eye is lower in the image).
    pub fn roll(&self) -> f32 {
        let [l, r] = [Eye::Left, Eye::Right].map(|e| self.eye_centre(e));
        (r[1] - l[1]).atan2(r[0] - l[0])
    }

    /// The axis-aligned box `[x, y, w, h]` around all 68 points.
    pub fn bounds(&self) -> [f32; 4] {
        let (mut lo, mut hi) = ([f32::MAX; 2], [f32::MIN; 2]);
        for p in &self.points {
            for k in 0..2 {
                lo[k] = lo[k].min(p[k]);
                hi[k] = hi[k].max(p[k]);
            }
        }
        [lo[0], lo[1], hi[0] - lo[0], hi[1] - lo[1]]
    }
}

fn centroid(points: &[[f32; 2]]) -> [f32; 2] {
    let n = points.len() as f32;
    let (sx, sy) = points
        .iter()
        .fold((0.0, 0.0), |(sx, sy), p| (sx + p[0], sy + p[1]));
    [sx / n, sy / n]
}

/// A 4-layer dense block: conv0 downsamples by 2, conv1..conv3 each see the sum of all
/// earlier outputs of the block.
struct DenseBlock {
    first: First,
    rest: [SeparableConv; 3],
}

enum First {
    Full(Conv3x3),
    Separable(SeparableConv),
}

impl DenseBlock {
    fn load(
        map: &mut HashMap<String, Tensor>,
        prefix: &str,
        cin: usize,
        cout: usize,
        first_is_full: bool,
    ) -> Result<DenseBlock, WeightsError> {
        let first = if first_is_full {
            First::Full(Conv3x3::load(map, &format!("{prefix}/conv0"), cin, cout)?)
        } else {
            First::Separable(SeparableConv::load(
                map,
                &format!("{prefix}/conv0"),
                cin,
                cout,
            )?)
        };
        let sep = |map: &mut HashMap<String, Tensor>, i: usize| {
            SeparableConv::load(map, &format!("{prefix}/conv{i}"), cout, cout)
        };
        Ok(DenseBlock {
            first,
            rest: [sep(map, 1)?, sep(map, 2)?, sep(map, 3)?],
        })
    }

    fn forward(&self, x: &FeatureMap) -> FeatureMap {
        let down = Pad::same(x.h, x.w, 3, 2);
        let mut sum = match &self.first {
            First::Full(conv) => conv.forward(x, 2, down),
            First::Separable(conv) => conv.forward(x, 2, down),
        };
        ops::relu(&mut sum);
        let mut input = sum.clone();
        for (i, layer) in self.rest.iter().enumerate() {
            let out = layer.forward(&input, 1, Pad::uniform(1));
            ops::add_assign(&mut sum, &out);
            if i < 2 {
                input.clone_from(&sum);
                ops::relu(&mut input);
            }
        }
        ops::relu(&mut sum);
        sum
    }
}

/// The 68-point landmark net.
pub struct LandmarkNet {
    blocks: [DenseBlock; 4],
    fc_weights: Vec<f32>,
    fc_bias: Vec<f32>,
}

impl LandmarkNet {
    pub fn load(map: &mut HashMap<String, Tensor>) -> Result<LandmarkNet, WeightsError> {
        Ok(LandmarkNet {
            blocks: [
                DenseBlock::load(map, "dense0", 3, 32, true)?,
                DenseBlock::load(map, "dense1", 32, 64, false)?,
                DenseBlock::load(map, "dense2", 64, 128, false)?,
                DenseBlock::load(map, "dense3", 128, 256, false)?,
            ],
            fc_weights: take(map, "fc/weights", &[256, 136])?,
            fc_bias: take(map, "fc/bias", &[136])?,
        })
    }

    /// Landmarks of the face in `bbox` (`[x, y, w, h]`, image pixels). A box that is empty after
    /// clipping to the image yields all points at the clipped corner.
    pub fn landmarks(&self, img: &RgbImage, bbox: [f32; 4]) -> Landmarks {
        let crop = Crop::new(img.width(), img.height(), bbox);
        let mut input = ops::resize_bilinear(crop.side, crop.side, INPUT_SIZE, |x, y| {
            crop.fetch(img, x, y)
        });
        ops::normalise_rgb(&mut input, MEAN_RGB);
        let raw = self.forward(&input);
        let scale = crop.side as f32;
        let mut points = [[0.0; 2]; 68];
        for (p, xy) in points.iter_mut().zip(raw.chunks_exact(2)) {
            *p = [
                xy[0] * scale + crop.origin[0],
                xy[1] * scale + crop.origin[1],
            ];
        }
        Landmarks { points }
    }

    fn forward(&self, input: &FeatureMap) -> Vec<f32> {
        let mut x = self.blocks[0].forward(input);
        for block in &self.blocks[1..] {
            x = block.forward(&x);
        }
        let pooled = ops::avg_pool_valid(&x, 7, 2);
        ops::dense(&pooled.data, &self.fc_weights, &self.fc_bias)
    }
}

/// The whole-pixel crop of a box and its centring in a zero-padded square.
struct Crop {
    x0: usize,
    y0: usize,
    w: usize,
    h: usize,
    side: usize,
    pad_x: usize,
    pad_y: usize,
    /// Image position of the padded square's (0, 0).
    origin: [f32; 2],
}

impl Crop {
    fn new(img_w: u32, img_h: u32, bbox: [f32; 4]) -> Crop {
        let (iw, ih) = (img_w as f32, img_h as f32);
        let cx = bbox[0].max(0.0).min(iw);
        let cy = bbox[1].max(0.0).min(ih);
        let cw = (bbox[0] + bbox[2] - cx).min(iw - cx).max(0.0);
        let ch = (bbox[1] + bbox[3] - cy).min(ih - cy).max(0.0);
        let (x0, y0) = (cx.floor() as usize, cy.floor() as usize);
        let w = (cw.floor() as usize).min(img_w as usize - x0.min(img_w as usize));
        let h = (ch.floor() as usize).min(img_h as usize - y0.min(img_h as usize));
        let side = w.max(h).max(1);
        // face-api appends round(diff / 2) and prepends the rest (tf padToSquare, centred).
        let before = |n: usize| {
            let diff = side - n;
            diff - (diff as f32 * 0.5).round() as usize
        };
        let (pad_x, pad_y) = (before(w), before(h));
        Crop {
            x0,
            y0,
            w,
            h,
            side,
            pad_x,
            pad_y,
            origin: [x0 as f32 - pad_x as f32, y0 as f32 - pad_y as f32],
        }
    }

    /// Raw pixel `(x, y)` of the padded square: image content inside the crop, zero outside.
    fn fetch(&self, img: &RgbImage, x: usize, y: usize) -> [f32; 3] {
        match (x.checked_sub(self.pad_x), y.checked_sub(self.pad_y)) {
            (Some(cx), Some(cy)) if cx < self.w && cy < self.h => img
                .get_pixel((self.x0 + cx) as u32, (self.y0 + cy) as u32)
                .0
                .map(f32::from),
            _ => [0.0; 3],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Landmarks {
        let mut points = [[0.0; 2]; 68];
        for (i, p) in points.iter_mut().enumerate() {
            *p = [i as f32, 2.0 * i as f32];
        }
        Landmarks { points }
    }

    #[test]
    fn region_helpers_use_ibug_indices() {
        let l = sample();
        assert_eq!(l.mouth_outer().len(), 12);
        assert_eq!(l.mouth_inner()[0], [60.0, 120.0]);
        assert_eq!(l.left_eye()[0], [36.0, 72.0]);
        assert_eq!(l.right_eye()[5], [47.0, 94.0]);
        assert_eq!(l.eye_centre(Eye::Left), [38.5, 77.0]);
        assert_eq!(l.eye_centre(Eye::Right), [44.5, 89.0]);
        assert_eq!(l.mouth_corners(), [[48.0, 96.0], [54.0, 108.0]]);
        assert_eq!(l.mouth_centre(), [53.5, 107.0]);
        assert_eq!(l.jaw().len(), 17);
        assert_eq!(l.nose()[0], [27.0, 54.0]);
        assert_eq!(l.bounds(), [0.0, 0.0, 67.0, 134.0]);
        assert!((l.inter_ocular() - 6.0f32.hypot(12.0)).abs() < 1e-4);
        assert!((l.roll() - 12.0f32.atan2(6.0)).abs() < 1e-6);
    }

    #[test]
    fn crop_is_clipped_floored_and_centred_like_face_api() {
        // A 10.7 x 7.2 box at (-2.5, 3.9) in a 20 x 20 image: clipped to x 0..8.2, y 3.9..11.1,
        // floored to 8 x 7 at (0, 3); the square is 8 wide, so one zero row goes above
        // (diff 1: round(0.5) = 1 appended below, 0 prepended).
        let c = Crop::new(20, 20, [-2.5, 3.9, 10.7, 7.2]);
        assert_eq!((c.x0, c.y0, c.w, c.h, c.side), (0, 3, 8, 7, 8));
        assert_eq!((c.pad_x, c.pad_y), (0, 0));
        let c = Crop::new(20, 20, [2.0, 2.0, 4.0, 9.0]);
        assert_eq!((c.side, c.pad_x, c.pad_y), (9, 2, 0));
        assert_eq!(c.origin, [0.0, 2.0]);
        let img = RgbImage::from_pixel(20, 20, image::Rgb([9, 9, 9]));
        assert_eq!(c.fetch(&img, 0, 0), [0.0; 3]);
        assert_eq!(c.fetch(&img, 2, 0), [9.0; 3]);
        assert_eq!(c.fetch(&img, 6, 8), [0.0; 3]);
        let outside = Crop::new(20, 20, [30.0, 30.0, 5.0, 5.0]);
        assert_eq!((outside.w, outside.h, outside.side), (0, 0, 1));
    }
}
