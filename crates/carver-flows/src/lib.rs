//! carver's flows: what a front end asks carver to do. Each flow takes typed inputs and returns
//! the versioned document of `carver-schema` that the CLI prints with `--format json`; a front
//! end (the `carver` CLI, the Python package) only parses its arguments, calls one flow and
//! renders the answer. Long flows report through [`Progress`], so each front end draws its own.
//!
//! - [`recommend::recommend`]: rank configurations for many shapes on several GPUs.
//! - [`moe::moe`]: the fused-MoE kernel's config file for a layer on several GPUs.
//! - [`price::price`]: the model's verdict on configurations the caller already has.
//! - [`archs`]: list and show the hardware database, resolve the GPUs to plan for; with the
//!   `gpu` feature, [`archs::detect`] and [`archs::calibrate`].
//! - [`cache`]: list, show, export, import, recover, clear and remove in the tuning database;
//!   [`plausible`] checks what goes in against the hardware model.
//! - [`tune`] (the `gpu` feature): look up, tune and store carver's own Hopper family, and time
//!   one configuration against cuBLAS.
//!
//! ```
//! use carver::Family;
//! use carver_flows::recommend::{RecommendRequest, recommend};
//! use carver_flows::{Locations, Silent};
//!
//! # fn main() -> Result<(), carver_flows::FlowError> {
//! # let dir = tempfile::tempdir().unwrap();
//! # let loc = Locations { hardware_db: None, cache_dir: Some(dir.path().to_path_buf()) };
//! let request = RecommendRequest::new("h100", Family::Triton, 4096, 4096, 4096);
//! let answer = recommend(&loc, &request, &Silent)?;
//! assert_eq!(answer.output.results[0].hints.len(), 8);
//! # Ok(())
//! # }
//! ```

pub mod archs;
pub mod cache;
mod error;
mod files;
mod locations;
mod measured;
pub mod moe;
pub mod plausible;
pub mod price;
pub mod progress;
pub mod recommend;
pub mod shapes;
pub mod tune;

pub use error::FlowError;
pub use locations::Locations;
pub use progress::{Progress, Silent};
