pub(crate) mod ach;
mod ach_demo;
pub(crate) mod ach_engine;
mod demo_dir;
mod feed;
pub(crate) mod feed_bench;
pub(crate) mod feed_emulate;
pub(crate) mod feed_retention;
mod inspect;
mod jobs;
mod limits;
mod notes;
mod notes_run;
mod prune;
mod queues;
mod schedule;
mod server;
mod steer;
mod wait;
mod worker;
mod workflow;

use std::process::ExitCode;

use anyhow::Result;

pub use feed::parse_durability;
pub use jobs::parse_state;
pub use limits::parse_per;
pub use prune::parse_before;

use crate::bench;
use crate::cli::{Ach, Bench, Cli, Command, Feed, LimitCmd, Notes, ScheduleCmd};
pub use schedule::spawn_scheduler;

pub async fn run(cli: Cli) -> Result<ExitCode> {
    let at = &cli.data;
    match cli.command {
        Command::Runs { limit, json } => inspect::runs(at, limit, json).await,
        Command::Status {
            run,
            failures,
            json,
        } => inspect::status(at, &run, failures, json).await,
        Command::Retry {
            run: _,
            job: Some(id),
        } => jobs::retry(at, id).await,
        Command::Retry { run, job: None } => {
            steer::retry(at, run.as_deref().unwrap_or_default()).await
        }
        Command::Delete { job } => jobs::delete(at, job).await,
        Command::Job { id, json } => jobs::show(at, id, json).await,
        Command::Jobs(args) => jobs::list(at, args).await,
        Command::Cancel {
            run,
            job,
            chain,
            reason,
        } => steer::cancel(at, run, job, chain, &reason).await,
        Command::Queues { json } => queues::list(at, json).await,
        Command::Pause { queue } => queues::pause(at, &queue).await,
        Command::Resume { queue } => queues::resume(at, &queue).await,
        Command::Wait {
            run,
            on_done,
            timeout,
        } => wait::wait(at, &run, on_done, timeout).await,
        Command::Prune { before, dry_run } => prune::prune(at, before, dry_run).await,
        Command::Bench(Bench::Engine(args)) => bench::engine(at, args).await,
        Command::Bench(Bench::Notes(args)) => bench::notes(args).await,
        Command::Bench(Bench::Server(args)) => bench::server(at, args).await,
        Command::Bench(Bench::Browse(args)) => bench::browse(at, args).await,
        Command::Bench(Bench::Ach(args)) => bench::ach(at, args).await,
        Command::Feed(Feed::Serve(args)) => feed::serve(args).await,
        Command::Feed(Feed::EmulateCore(args)) => feed_emulate::emulate_core(args).await,
        Command::Feed(Feed::EmulateClients(args)) => feed_emulate::emulate_clients(args).await,
        Command::Bench(Bench::Feed(args)) => feed_bench::bench(args).await,
        Command::Server(args) => server::server(at, args).await,
        Command::Worker(args) => worker::worker(at, args).await,
        Command::Schedule(ScheduleCmd::Apply { file }) => schedule::apply(at, &file).await,
        Command::Schedule(ScheduleCmd::Delete { name }) => schedule::delete(at, &name).await,
        Command::Schedules { json } => schedule::list(at, json).await,
        Command::Limit(LimitCmd::Set {
            target,
            starts,
            per,
            running,
        }) => limits::set(at, &target, starts, Some(per), running).await,
        Command::Limit(LimitCmd::Delete { target }) => limits::delete(at, &target).await,
        Command::Limits { json } => limits::list(at, json).await,
        Command::Workflow(cmd) => workflow::run(at, cmd).await,
        Command::Notes(Notes::Generate {
            clients,
            date,
            out,
            seed,
            heavy_trades,
        }) => notes::generate(clients, date, &out, seed, heavy_trades),
        Command::Ach(Ach::Validate { files, json }) => ach::validate(&files, json),
        Command::Ach(Ach::Import { file, rules }) => ach::import(at, &file, rules.as_deref()).await,
        Command::Ach(Ach::Cancel {
            entry_id,
            reason,
            before_import,
        }) => ach::cancel(at, &entry_id, &reason, before_import).await,
        Command::Ach(Ach::Entry { entry_id, json }) => ach::entry(at, &entry_id, json).await,
        Command::Ach(Ach::Engine(args)) => ach_engine::engine(at, args).await,
        Command::Ach(Ach::Status { date, rules, json }) => {
            ach_engine::status(at, date, rules.as_deref(), json).await
        }
        Command::Ach(Ach::Generate {
            entries,
            date,
            out,
            banks,
            bad,
            seed,
        }) => ach_demo::generate(entries, date, &out, banks, bad, seed),
        Command::Ach(Ach::Demo(args)) => ach_demo::demo(at, args).await,
        Command::Notes(Notes::Run(args)) => notes_run::run(at, *args).await,
        Command::Notes(Notes::Demo(args)) => notes_run::demo(at, args).await,
        Command::Notes(Notes::RenderHelper { template }) => {
            notes::render_helper(template.as_deref())
        }
        Command::Notes(Notes::Check {
            trades,
            clients,
            broker_file,
            date,
            show,
        }) => notes::check(&trades, &clients, &broker_file, date, show),
    }
}
