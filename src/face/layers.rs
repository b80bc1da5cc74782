//! The two layer types both face-api nets are built from, loaded from a TensorFlow.js weight map.
//!
//! Input: a name → tensor map (see `tfjs_weights`) and a name prefix such as `conv1` or
//! `dense2/conv3`. Output: layers whose `forward` runs on [`FeatureMap`]s. Invariant: every
//! tensor is checked for its exact shape at load time, so `forward` never meets a size surprise.

use std::collections::HashMap;

use super::ops::{self, FeatureMap, Pad};
use super::tfjs_weights::{Tensor, WeightsError, take};

/// A full 3×3 convolution with bias (`{prefix}/filters`, `{prefix}/bias`).
pub struct Conv3x3 {
    filters: Vec<f32>,
    bias: Vec<f32>,
}

impl Conv3x3 {
    pub fn load(
        map: &mut HashMap<String, Tensor>,
        prefix: &str,
        cin: usize,
        cout: usize,
    ) -> Result<Conv3x3, WeightsError> {
        Ok(Conv3x3 {
            filters: take(map, &format!("{prefix}/filters"), &[3, 3, cin, cout])?,
            bias: take(map, &format!("{prefix}/bias"), &[cout])?,
        })
    }

    pub fn forward(&self, x: &FeatureMap, stride: usize, pad: Pad) -> FeatureMap {
        ops::conv3x3(x, &self.filters, &self.bias, stride, pad)
    }
}

/// A 1×1 convolution with bias (`{prefix}/filters`, `{prefix}/bias`).
pub struct Conv1x1 {
    weights: Vec<f32>,
    bias: Vec<f32>,
}

impl Conv1x1 {
    pub fn load(
        map: &mut HashMap<String, Tensor>,
        prefix: &str,
        cin: usize,
        cout: usize,
    ) -> Result<Conv1x1, WeightsError> {
        Ok(Conv1x1 {
            weights: take(map, &format!("{prefix}/filters"), &[1, 1, cin, cout])?,
            bias: take(map, &format!("{prefix}/bias"), &[cout])?,
        })
    }

    pub fn forward(&self, x: &FeatureMap) -> FeatureMap {
        ops::pointwise(x, &self.weights, &self.bias)
    }
}

/// Depthwise 3×3 then pointwise 1×1 plus bias, as `tf.separableConv2d(...) + bias`.
pub struct SeparableConv {
    depthwise: Vec<f32>,
    pointwise: Vec<f32>,
    bias: Vec<f32>,
}

impl SeparableConv {
    pub fn load(
        map: &mut HashMap<String, Tensor>,
        prefix: &str,
        cin: usize,
        cout: usize,
    ) -> Result<SeparableConv, WeightsError> {
        Ok(SeparableConv {
            depthwise: take(map, &format!("{prefix}/depthwise_filter"), &[3, 3, cin, 1])?,
            pointwise: take(
                map,
                &format!("{prefix}/pointwise_filter"),
                &[1, 1, cin, cout],
            )?,
            bias: take(map, &format!("{prefix}/bias"), &[cout])?,
        })
    }

    pub fn forward(&self, x: &FeatureMap, stride: usize, pad: Pad) -> FeatureMap {
        let dw = ops::depthwise3x3(x, &self.depthwise, stride, pad);
        ops::pointwise(&dw, &self.pointwise, &self.bias)
    }
}
