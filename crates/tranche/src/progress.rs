//! Progress of a long run on stderr: a live bar on a terminal, a plain line every few
//! seconds otherwise (a log file or CI keeps a readable record).

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tranche_notes::night::Stall;
use tranche_types::RunProgress;

pub struct RunDisplay {
    bar: Option<ProgressBar>,
    started: Instant,
    last_line: Instant,
    every: Duration,
    /// Jobs already ended when this process started (a resumed run).
    ended_at_start: Option<u64>,
    /// What holds the run up, as last said, and since when.
    stall: Option<(Stall, Instant)>,
}

impl RunDisplay {
    pub fn new(what: &str) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template(
                    "{prefix} [{bar:30}] {pos}/{len} jobs  {elapsed} elapsed, ETA {eta}  {msg}",
                )
                .expect("a valid progress template")
                .progress_chars("=> "),
            );
            bar.set_prefix(what.to_string());
            bar
        });
        RunDisplay {
            bar,
            started: Instant::now(),
            last_line: Instant::now(),
            every: Duration::from_secs(5),
            ended_at_start: None,
            stall: None,
        }
    }

    /// Say once what holds the run up (not on every update: a paused night would
    /// repeat it every few seconds), and once when it moves again.
    pub fn stalled(&mut self, now: Option<Stall>) {
        let same = match (&self.stall, &now) {
            (Some((was, _)), Some(is)) => was.same_kind(is),
            (None, None) => true,
            _ => false,
        };
        if same {
            return;
        }
        if let Some((was, since)) = self.stall.take() {
            self.say(&was.ended(since.elapsed()));
        }
        if let Some(is) = now {
            self.say(&is.to_string());
            self.stall = Some((is, Instant::now()));
        }
    }

    fn say(&self, line: &str) {
        match &self.bar {
            Some(bar) => bar.println(line),
            None => eprintln!("{line}"),
        }
    }

    /// Show the run's progress; `detail` is the per-step line (e.g. "rendered 120 · …").
    pub fn update(&mut self, p: &RunProgress, detail: &str) {
        let ended = p.ended();
        let base = *self.ended_at_start.get_or_insert(ended);
        let secs = self.started.elapsed().as_secs_f64().max(1e-3);
        let rate = (ended - base.min(ended)) as f64 / secs;
        match &self.bar {
            Some(bar) => {
                bar.set_length(p.total);
                bar.set_position(ended);
                bar.set_message(format!("{rate:.0} jobs/s  {detail}"));
            }
            None => {
                if self.last_line.elapsed() >= self.every || p.is_finished() {
                    let eta = if rate > 0.0 {
                        format!("{:.0} s", (p.total - ended) as f64 / rate)
                    } else {
                        "-".to_string()
                    };
                    eprintln!(
                        "  {ended}/{} jobs ({rate:.0}/s, ETA {eta}), failed {}: {detail}",
                        p.total, p.failed
                    );
                    self.last_line = Instant::now();
                }
            }
        }
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish();
        }
    }
}
