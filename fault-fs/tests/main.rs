//! fault-fs's tests: conformance, the model against the kernel, the explorer.
//! Each module is one file of this directory, as its own binary was before; one binary
//! per crate links the dependencies once.

mod common;
mod conformance;
mod differential;
mod explorer;
mod host_ext;
mod model;
mod model_props;
