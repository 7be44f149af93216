//! The HTTP API end to end: a real server on a free loopback port over a real embedded
//! backend in a temporary directory, driven with a real HTTP client.

mod ach;
mod ach_status;
mod auth;
mod dashboard;
mod engine_worker;
mod errors;
mod expiry;
mod feed;
mod jobs;
mod live;
mod metrics;
mod openapi;
mod pause;
mod personal_data;
mod prune;
mod runs;
mod schedules;
mod slow_clients;
mod submit;
mod unique_for;
mod workers;
