//! Each row's terms and the per-backend fit of the speed model to the rows.

use std::sync::OnceLock;

use serde::Serialize;

use super::dataset::{model_arch, Dataset, PublishedError, SpeedRow, Test};
use crate::sizing::hardware::{Backend, PresetSpecs, SpeedParams};
use crate::sizing::kv::{kv_cache, KvDtype};
use crate::sizing::linfit::{fit_nonneg, fit_roofline, Features};
use crate::sizing::throughput::{
    attention_flops, decode_terms, matmul_flops, prefill_terms, DECODE_ROOFLINE,
};
use crate::sizing::weights::from_params;
use crate::units::Bytes;

pub use crate::sizing::throughput::DECODE_TERMS;
/// Number of prefill terms.
pub const PREFILL_TERMS: usize = 4;

/// The decode terms the fit may use: all but two.
///
/// - Bytes over matrix throughput (1) divides the bytes read by the tensor-core rate, which
///   llama.cpp's one-token kernels do not use (they run on the vector units); on CUDA it let
///   the RTX 3090's low FP32-accumulate tensor figure stand for the slowness of small quantized
///   models, over-predicting the L40S's 70B decode by 44 % when that device was held out.
/// - Attention FLOPs at a fixed rate (7) is the same seconds on every device. With it, the
///   CUDA fit explained the RTX 3090's depth cost by a device-blind constant, and held out
///   the 3090's Q4_K_M slowdown from tg512 to tg8192 came out 14 % against 24 % published.
///   The attention a decode step pays is instead split between what the device's memory and
///   ALUs set: the K and V reads of the unfused kernels over bandwidth (8; they read the cache
///   once per query head) and the score arithmetic over matrix throughput (6). Held out by
///   device, every published depth sweep then lands within 10 points.
pub const DECODE_FITTED_TERMS: [usize; 7] = [0, 2, 3, 4, 5, 6, 8];

/// The model's terms for one speed row on its preset device.
pub fn row_features(r: &SpeedRow, specs: &PresetSpecs) -> Result<Features, PublishedError> {
    let unknown = |what: &'static str, name: &str| PublishedError::Unknown {
        file: "?".into(),
        line: 0,
        what,
        name: name.to_owned(),
    };
    let spec = specs
        .get(&r.device)
        .ok_or_else(|| unknown("device", &r.device))?;
    let arch = model_arch(&r.model).ok_or_else(|| unknown("model", &r.model))?;
    let params = (r.params_b * 1e9).round() as u64;
    let bpw = match r.size_gib {
        Some(g) => g * Bytes::GIB as f64 * 8.0 / params as f64,
        None => crate::sizing::Quant::parse(&r.quant)?.bits_per_weight,
    };
    let w = from_params(&arch, params, bpw)?;
    let wbytes = crate::sizing::throughput::weight_bytes_per_token(&arch, &w)? as f64;
    let x = match r.test {
        Test::Tg => {
            // Mean KV depth over the generated tokens.
            let depth = f64::from(r.depth) + (f64::from(r.n_tokens) - 1.0) / 2.0;
            let kv_per_pos = kv_cache(&arch, KvDtype::F16, 1)?.per_token.0 as f64;
            decode_terms(
                &arch,
                KvDtype::F16,
                wbytes + depth * kv_per_pos,
                crate::sizing::throughput::quantized_weights(&arch, &w),
                depth,
                spec.bandwidth,
                spec.matrix_flops,
            )
            .to_vec()
        }
        Test::Pp => {
            let span = f64::from(r.depth) + (f64::from(r.n_tokens) + 1.0) / 2.0;
            prefill_terms(
                matmul_flops(&arch, &w),
                attention_flops(&arch, span),
                spec.matrix_flops,
            )
            .to_vec()
        }
    };
    Ok(Features {
        x,
        t: 1.0 / r.tok_s,
    })
}

/// The fitted terms of one backend.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BackendFit {
    /// Backend.
    pub backend: Backend,
    /// Decode coefficients, in the order of [`decode_terms`].
    pub decode: Vec<f64>,
    /// Prefill coefficients, in the order of [`prefill_terms`].
    pub prefill: Vec<f64>,
    /// Decode rows the fit rests on.
    pub decode_rows: usize,
    /// Prefill rows the fit rests on.
    pub prefill_rows: usize,
    /// Devices the rows come from.
    pub devices: Vec<String>,
}

impl BackendFit {
    /// The fit as speed-model constants.
    pub fn speed_params(&self) -> SpeedParams {
        let d = &self.decode;
        let p = &self.prefill;
        SpeedParams {
            decode_efficiency: 1.0 / d[0],
            prefill_efficiency: 1.0 / p[0],
            decode_alu_cost: d[1],
            decode_dequant_cost: d[2],
            decode_s_per_tb: d[3],
            fixed_cost_s: d[4],
            per_layer_cost_s: d[5],
            attention_cost: d[6],
            attention_s_per_pflop: d[7],
            attention_read_cost: d[8],
            prefill_attention_cost: p[1],
            prefill_s_per_pflop: p[2],
            prefill_attention_s_per_pflop: p[3],
            source: format!(
                "fit to {} decode and {} prefill llama.cpp rows published for {} ({}); \
                 `boyd size --check-published` shows each row and the error; boyd's own GPU \
                 path (candle) is slower until `boyd validate` calibrates it",
                self.decode_rows,
                self.prefill_rows,
                self.backend,
                self.devices.join(", ")
            ),
        }
    }
}

fn usable(rows: &[SpeedRow], backend: Backend, test: Test) -> impl Iterator<Item = &SpeedRow> {
    rows.iter()
        .filter(move |r| r.backend == backend && r.test == test && r.outlier.is_none())
}

/// Fit `backend`'s terms to `rows` (outliers and other backends skipped).
pub fn fit_backend(
    rows: &[SpeedRow],
    backend: Backend,
    specs: &PresetSpecs,
) -> Result<BackendFit, PublishedError> {
    let feats = |test| -> Result<Vec<Features>, PublishedError> {
        usable(rows, backend, test)
            .map(|r| row_features(r, specs))
            .collect()
    };
    let dec = feats(Test::Tg)?;
    let pre = feats(Test::Pp)?;
    let decode = fit_roofline(
        &dec,
        DECODE_TERMS,
        DECODE_ROOFLINE,
        &[0],
        &DECODE_FITTED_TERMS,
    )
    .ok_or(PublishedError::Empty {
        backend,
        test: Test::Tg,
    })?;
    let prefill =
        fit_nonneg(&pre, PREFILL_TERMS, &[0], &[0, 1, 2, 3]).ok_or(PublishedError::Empty {
            backend,
            test: Test::Pp,
        })?;
    let mut devices: Vec<String> = rows
        .iter()
        .filter(|r| r.backend == backend && r.outlier.is_none())
        .map(|r| r.device.clone())
        .collect();
    devices.sort();
    devices.dedup();
    Ok(BackendFit {
        backend,
        decode,
        prefill,
        decode_rows: dec.len(),
        prefill_rows: pre.len(),
        devices,
    })
}

/// The shipped fit per GPU backend, computed once from the embedded dataset.
pub fn shipped_fit(backend: Backend) -> Option<&'static BackendFit> {
    static FITS: OnceLock<Vec<BackendFit>> = OnceLock::new();
    FITS.get_or_init(|| {
        let Ok(ds) = Dataset::shipped() else {
            return Vec::new();
        };
        let Ok(specs) = PresetSpecs::shipped() else {
            return Vec::new();
        };
        [Backend::Cuda, Backend::Metal]
            .into_iter()
            .filter_map(|b| fit_backend(&ds.speed, b, &specs).ok())
            .collect()
    })
    .iter()
    .find(|f| f.backend == backend)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tg_row_is_predicted_at_its_mean_depth() {
        let specs = PresetSpecs::shipped().expect("specs");
        let mut r = Dataset::shipped().expect("ds").speed[0].clone();
        r.test = Test::Tg;
        r.n_tokens = 1;
        r.depth = 0;
        let f0 = row_features(&r, &specs).expect("f");
        r.n_tokens = 4097;
        let f1 = row_features(&r, &specs).expect("f");
        // Mean depth 2048: the bytes terms grow by 2048 KV positions of 128 KiB (Llama-3-8B,
        // f16), the layer and fixed terms do not.
        let spec = specs.get(&r.device).expect("spec");
        let grew = (f1.x[0] - f0.x[0]) * spec.bandwidth;
        assert!((grew - 2048.0 * 131_072.0).abs() < 1.0, "{grew}");
        assert_eq!(
            f0.x[2], f1.x[2],
            "the quantized weights do not depend on depth"
        );
        assert_eq!(f0.x[4], f1.x[4]);
        assert_eq!(f0.x[5], f1.x[5]);
        assert!(f1.x[6] > 0.0 && f0.x[6] == 0.0);
        // The unfused attention reads K and V once per query head: 32 layers × 32 heads ×
        // (128 + 128) values × 2 bytes per position, four times the cache's 8 KV heads.
        let reads = (f1.x[8] - f0.x[8]) * spec.bandwidth;
        assert!((reads - 2048.0 * 524_288.0).abs() < 1.0, "{reads}");
        assert_eq!(f0.x[8], 0.0);
    }
}
