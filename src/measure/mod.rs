//! "What did happen": speed and memory measured on this machine, and their comparison with
//! the sizing model's predictions.

pub mod bench;
