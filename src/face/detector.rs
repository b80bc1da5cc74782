//! face-api's tiny face detector (a Tiny-YOLOv2 variant with separable convolutions).
//!
//! Input: an RGB image of any size. Output: face boxes in image pixels with their scores, after
//! non-maximum suppression. Invariants, all as in face-api 1.7.15: the image is zero-padded at the
//! right/bottom to a square and resized (TensorFlow legacy bilinear) to 416×416; boxes come from a
//! 13×13 grid × 5 anchors with sigmoid centres, exponential sizes and sigmoid scores; a box is
//! kept when its score is above 0.5 and it overlaps no better-scoring kept box by IoU > 0.4.

use std::collections::HashMap;

use image::RgbImage;

use super::layers::{Conv1x1, Conv3x3, SeparableConv};
use super::ops::{self, FeatureMap, Pad};
use super::tfjs_weights::{Tensor, WeightsError};

const INPUT_SIZE: usize = 416;
const MEAN_RGB: [f32; 3] = [117.001, 114.697, 97.404];
const ANCHORS: [(f32, f32); 5] = [
    (1.603_231, 2.094_468),
    (6.041_143, 7.080_126),
    (2.882_459, 3.518_061),
    (4.266_906, 5.178_857),
    (9.041_765, 10.663_08),
];
const SCORE_THRESHOLD: f32 = 0.5;
const IOU_THRESHOLD: f32 = 0.4;
const LEAKY_ALPHA: f32 = 0.1;

/// One detected face: `[x, y, w, h]` in image pixels (may reach past the border) and its score.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FaceBox {
    pub bbox: [f32; 4],
    pub score: f32,
}

impl FaceBox {
    fn area(&self) -> f32 {
        self.bbox[2] * self.bbox[3]
    }
}

/// The detector's layers.
pub struct TinyFaceDetector {
    conv0: Conv3x3,
    separable: [SeparableConv; 5],
    conv8: Conv1x1,
}

impl TinyFaceDetector {
    pub fn load(map: &mut HashMap<String, Tensor>) -> Result<TinyFaceDetector, WeightsError> {
        let sep = |map: &mut HashMap<String, Tensor>, i: usize| {
            SeparableConv::load(map, &format!("conv{i}"), 8 << i, 16 << i)
        };
        Ok(TinyFaceDetector {
            conv0: Conv3x3::load(map, "conv0", 3, 16)?,
            separable: [
                sep(map, 1)?,
                sep(map, 2)?,
                sep(map, 3)?,
                sep(map, 4)?,
                sep(map, 5)?,
            ],
            conv8: Conv1x1::load(map, "conv8", 512, 25)?,
        })
    }

    /// All faces scoring above 0.5, largest first.
    pub fn detect(&self, img: &RgbImage) -> Vec<FaceBox> {
        let (w, h) = (img.width() as usize, img.height() as usize);
        if w == 0 || h == 0 {
            return Vec::new();
        }
        let side = w.max(h);
        let mut input = ops::resize_bilinear(side, side, INPUT_SIZE, |x, y| {
            if x < w && y < h {
                img.get_pixel(x as u32, y as u32).0.map(f32::from)
            } else {
                [0.0; 3]
            }
        });
        ops::normalise_rgb(&mut input, MEAN_RGB);
        let grid = self.forward(&input);
        let mut boxes = decode(&grid, w, h);
        boxes.sort_by(|a, b| b.score.total_cmp(&a.score));
        let mut kept = non_max_suppression(boxes);
        kept.sort_by(|a, b| b.area().total_cmp(&a.area()));
        kept
    }

    fn forward(&self, input: &FeatureMap) -> FeatureMap {
        let mut x = self.conv0.forward(input, 1, Pad::NONE);
        ops::leaky_relu(&mut x, LEAKY_ALPHA);
        for (i, layer) in self.separable.iter().enumerate() {
            x = ops::max_pool2(&x, 2);
            x = layer.forward(&x, 1, Pad::uniform(1));
            ops::leaky_relu(&mut x, LEAKY_ALPHA);
            if i == 4 {
                x = ops::max_pool2(&x, 1);
            }
        }
        self.conv8.forward(&x)
    }
}

fn sigmoid(v: f32) -> f32 {
    1.0 / (1.0 + (-v).exp())
}

/// Turns the 13×13×(5×5) grid into pixel boxes, as face-api's `extractBoxes` then
/// `ObjectDetection` do (including their rounding of the resized image size).
fn decode(grid: &FeatureMap, w: usize, h: usize) -> Vec<FaceBox> {
    let scale = INPUT_SIZE as f32 / w.max(h) as f32;
    let resized_w = (w as f32 * scale).round().max(1.0);
    let resized_h = (h as f32 * scale).round().max(1.0);
    let longest = resized_w.max(resized_h);
    let (corr_x, corr_y) = (longest / resized_w, longest / resized_h);
    let cells = grid.h as f32;
    let mut out = Vec::new();
    for (cell, values) in grid.data.chunks_exact(grid.c).enumerate() {
        let (row, col) = ((cell / grid.w) as f32, (cell % grid.w) as f32);
        for (v, &(ax, ay)) in values.chunks_exact(5).zip(&ANCHORS) {
            let score = sigmoid(v[4]);
            if score <= SCORE_THRESHOLD {
                continue;
            }
            let cx = (col + sigmoid(v[0])) / cells * corr_x;
            let cy = (row + sigmoid(v[1])) / cells * corr_y;
            let bw = v[2].exp() * ax / cells * corr_x;
            let bh = v[3].exp() * ay / cells * corr_y;
            let (wf, hf) = (w as f32, h as f32);
            out.push(FaceBox {
                bbox: [(cx - bw / 2.0) * wf, (cy - bh / 2.0) * hf, bw * wf, bh * hf],
                score,
            });
        }
    }
    out
}

/// Intersection over union of two `[x, y, w, h]` boxes.
pub fn iou(a: [f32; 4], b: [f32; 4]) -> f32 {
    let iw = ((a[0] + a[2]).min(b[0] + b[2]) - a[0].max(b[0])).max(0.0);
    let ih = ((a[1] + a[3]).min(b[1] + b[3]) - a[1].max(b[1])).max(0.0);
    let inter = iw * ih;
    inter / (a[2] * a[3] + b[2] * b[3] - inter)
}

/// Greedy NMS over boxes sorted best-first.
fn non_max_suppression(sorted: Vec<FaceBox>) -> Vec<FaceBox> {
    let mut kept: Vec<FaceBox> = Vec::new();
    for candidate in sorted {
        if kept
            .iter()
            .all(|k| iou(k.bbox, candidate.bbox) <= IOU_THRESHOLD)
        {
            kept.push(candidate);
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iou_of_known_boxes() {
        assert_eq!(iou([0.0, 0.0, 2.0, 2.0], [0.0, 0.0, 2.0, 2.0]), 1.0);
        assert_eq!(iou([0.0, 0.0, 2.0, 2.0], [1.0, 0.0, 2.0, 2.0]), 2.0 / 6.0);
        assert_eq!(iou([0.0, 0.0, 1.0, 1.0], [5.0, 5.0, 1.0, 1.0]), 0.0);
    }

    #[test]
    fn nms_keeps_the_best_of_overlapping_boxes() {
        let b = |x: f32, score: f32| FaceBox {
            bbox: [x, 0.0, 10.0, 10.0],
            score,
        };
        let kept = non_max_suppression(vec![b(0.0, 0.9), b(1.0, 0.8), b(50.0, 0.7)]);
        assert_eq!(kept, vec![b(0.0, 0.9), b(50.0, 0.7)]);
    }

    #[test]
    fn decode_places_a_confident_cell_in_pixels() {
        let mut grid = FeatureMap::zeros(13, 13, 25);
        // Cell (row 6, col 6), anchor 1: centred offsets (sigmoid(0) = 0.5), size = anchor, score high.
        let at = (6 * 13 + 6) * 25 + 5;
        grid.data[at + 4] = 5.0;
        let boxes = decode(&grid, 520, 520);
        assert_eq!(boxes.len(), 1);
        let [x, y, w, h] = boxes[0].bbox;
        let cell = 520.0 / 13.0;
        assert!((x + w / 2.0 - 6.5 * cell).abs() < 1e-3);
        assert!((y + h / 2.0 - 6.5 * cell).abs() < 1e-3);
        assert!((w - ANCHORS[1].0 * cell).abs() < 1e-3);
        assert!((boxes[0].score - sigmoid(5.0)).abs() < 1e-6);
    }
}
