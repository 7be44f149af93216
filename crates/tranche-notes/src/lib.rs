//! The contract-note pipeline: a broker's day of trades becomes, per client, a
//! "contract note cum tax invoice" — charges computed with decimal arithmetic,
//! rendered to PDF, encrypted, signed and e-mailed — as chains of jobs on the engine.
//!
//! This crate is built in layers that mirror the chain: [`input`] reads and checks the
//! day's files (every problem with file, line and field; a bad row fails only its
//! client), [`charges`] computes a note's charges from dated [`rates`], [`note`] builds
//! the data a note shows (the `process` step's artifact), [`render`] lays it out as a
//! PDF, and [`pipeline`] makes each client's note a chain of jobs on the engine
//! (process → render → sign → mail). [`generate`] writes a realistic synthetic day for
//! demos and benchmarks. [`night`] does a whole night in one call, and says what `Day`
//! and `Night` mean.

#![deny(missing_docs)]

pub mod charges;
pub mod generate;
pub mod input;
pub mod model;
pub mod night;
pub mod note;
pub mod pipeline;
pub mod rates;
pub mod render;
