//! Key names for the reads done from Rust; the scripts build the same names in
//! `scripts/common.lua`, which documents the layout.

pub struct Keys {
    pub prefix: String,
}

impl Keys {
    pub fn errors(&self, id: i64) -> String {
        format!("{}e:{id}", self.prefix)
    }
    pub fn run(&self, run: &str) -> String {
        format!("{}r:{run}", self.prefix)
    }
    /// A run's unique keys → the first job enqueued under each.
    pub fn unique(&self, run: &str) -> String {
        format!("{}uq:{run}", self.prefix)
    }

    pub fn runs(&self) -> String {
        format!("{}runs", self.prefix)
    }
    pub fn failures(&self, run: &str) -> String {
        format!("{}fail:{run}", self.prefix)
    }
    pub fn ready(&self, queue: &str) -> String {
        format!("{}qr:{queue}", self.prefix)
    }
    pub fn scheduled(&self, queue: &str) -> String {
        format!("{}qs:{queue}", self.prefix)
    }
    pub fn queues(&self) -> String {
        format!("{}queues", self.prefix)
    }
    pub fn stats(&self, queue: &str) -> String {
        format!("{}qst:{queue}", self.prefix)
    }
    pub fn running(&self) -> String {
        format!("{}qrun", self.prefix)
    }
    pub fn effect(&self, key: &str) -> String {
        format!("{}eff:{key}", self.prefix)
    }
    /// A record (see `scripts/commit.lua`): hash of `v` (version) and `d` (value).
    pub fn record(&self, key: &str) -> String {
        format!("{}rec:{key}", self.prefix)
    }
    pub fn feed(&self) -> String {
        format!("{}feed", self.prefix)
    }
    pub fn feed_seq(&self) -> String {
        format!("{}seq:ev", self.prefix)
    }
    /// Paused queue names (set).
    pub fn paused(&self) -> String {
        format!("{}paused", self.prefix)
    }
    pub fn schedules(&self) -> String {
        format!("{}schs", self.prefix)
    }
    pub fn schedule(&self, name: &str) -> String {
        format!("{}sch:{name}", self.prefix)
    }
    pub fn wake_channel(&self) -> String {
        format!("{}wake", self.prefix)
    }
}
