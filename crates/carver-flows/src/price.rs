//! `price`: the cost model's verdict on configurations a caller already has, given in the
//! target's own parameter names (a `triton.Config` dict, a TileLang autotune dict), for one shape
//! on one GPU. A tuner that keeps its own config list ranks it with this instead of taking
//! carver's top-k.

use carver::{DType, Family, Layout, predict_native};
use carver_schema::{Prediction, Tile};

use crate::archs::{self, ArchChoice};
use crate::shapes::ParsedShape;
use crate::{FlowError, Locations, Progress};

/// The configurations to price and the problem they are for.
#[derive(Clone, Debug, PartialEq)]
pub struct PriceRequest {
    pub arch: ArchChoice,
    pub shape: ParsedShape,
    /// Input dtype of A and B.
    pub dtype: DType,
    /// Output dtype; the usual one for `dtype` when unset.
    pub out_dtype: Option<DType>,
    /// Accumulator dtype; the usual one for `dtype` when unset.
    pub acc_dtype: Option<DType>,
    /// Storage order of A and B.
    pub layouts: (Layout, Layout),
    pub family: Family,
    /// In the family's native form (what `carver recommend` prints as `hints[].config`).
    pub configs: Vec<serde_json::Value>,
}

/// The model's verdict on one configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Priced {
    /// The configuration as given.
    pub config: serde_json::Value,
    /// Its family-neutral tile and predicted time, or why the model cannot price it: a native
    /// dict that does not parse, a tile rule of the family it breaks, or a limit of the GPU it
    /// exceeds (the message says which, and what is accepted).
    pub verdict: Result<(Tile, Prediction), String>,
}

/// Prices every configuration of the request, in the order given. Only unusable inputs (an
/// unknown GPU, a shape or dtype the model rejects) end the flow; a configuration it cannot
/// price gets its reason in place. Warnings (a stored calibration that cannot be used) go to
/// `progress`.
pub fn price(
    loc: &Locations,
    request: &PriceRequest,
    progress: &dyn Progress,
) -> Result<Vec<Priced>, FlowError> {
    let arch = archs::resolve(loc, std::slice::from_ref(&request.arch), progress)?
        .pop()
        .expect("one arch resolved for one choice");
    let template = crate::recommend::template(
        &request.shape,
        request.dtype,
        request.out_dtype,
        request.acc_dtype,
        request.layouts,
        request.family,
    );
    // A problem the model rejects (a zero size, a dtype this GPU lacks) is the caller's error,
    // not one configuration's: each would get the same message.
    template.validate(&arch).map_err(FlowError::Model)?;
    Ok(request
        .configs
        .iter()
        .map(|config| Priced {
            config: config.clone(),
            verdict: predict_native(&template, &arch, config)
                .map(|(tile, prediction)| ((&tile).into(), (&prediction).into()))
                .map_err(|e| e.to_string()),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Silent;
    use crate::recommend::{RecommendRequest, recommend};
    use crate::shapes::ShapeRow;

    fn loc() -> (tempfile::TempDir, Locations) {
        let dir = tempfile::tempdir().unwrap();
        let loc = Locations {
            hardware_db: None,
            cache_dir: Some(dir.path().to_path_buf()),
        };
        (dir, loc)
    }

    fn request(configs: Vec<serde_json::Value>) -> PriceRequest {
        let ShapeRow { parsed, .. } = ShapeRow::one(4096, 4096, 4096, 1);
        PriceRequest {
            arch: ArchChoice::parse("h100"),
            shape: parsed.unwrap(),
            dtype: DType::F16,
            out_dtype: None,
            acc_dtype: None,
            layouts: (Layout::Row, Layout::Row),
            family: Family::Triton,
            configs,
        }
    }

    #[test]
    fn recommended_configs_are_priced_as_recommended() {
        let (_dir, loc) = loc();
        let rec = RecommendRequest::new("h100", Family::Triton, 4096, 4096, 4096);
        let hints = recommend(&loc, &rec, &Silent).unwrap().output.results[0]
            .hints
            .clone();
        let priced = price(
            &loc,
            &request(hints.iter().map(|h| h.config.clone()).collect()),
            &Silent,
        )
        .unwrap();
        assert_eq!(priced.len(), hints.len());
        for (p, h) in priced.iter().zip(&hints) {
            let (tile, prediction) = p.verdict.as_ref().unwrap();
            assert_eq!(tile, &h.tile);
            assert_eq!(prediction, &h.prediction);
        }
    }

    #[test]
    fn an_illegal_config_gets_its_reason_in_place() {
        let (_dir, loc) = loc();
        let bad = serde_json::json!({
            "kwargs": {"BLOCK_SIZE_M": 48, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32,
                       "GROUP_SIZE_M": 8, "SPLIT_K": 1},
            "num_warps": 4, "num_stages": 3
        });
        let priced = price(&loc, &request(vec![bad.clone()]), &Silent).unwrap();
        assert_eq!(priced[0].config, bad);
        let e = priced[0].verdict.as_ref().unwrap_err();
        assert!(
            e.contains("BLOCK_SIZE_M = 48") && e.contains("power of two"),
            "{e}"
        );
    }

    #[test]
    fn a_bad_problem_ends_the_flow() {
        let (_dir, loc) = loc();
        let mut r = request(vec![]);
        r.shape.k = 0;
        let e = price(&loc, &r, &Silent).unwrap_err().to_string();
        assert!(e.contains("K is 0"), "{e}");
    }
}
