//! The steps of a client's chain by name, for everything kept per step in chain order
//! (its job ids, their records, [`STEPS`](super::STEPS)): `ids[ChainStep::Mail]`, not `ids[3]`.

use std::ops::{Index, IndexMut};

use super::{Step, MAIL, PROCESS, RENDER, SIGN};

/// A step of the chain `process → render → sign → mail`, in that order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum ChainStep {
    Process,
    Render,
    Sign,
    Mail,
}

impl ChainStep {
    /// In chain order.
    pub(crate) const ALL: [ChainStep; 4] = [
        ChainStep::Process,
        ChainStep::Render,
        ChainStep::Sign,
        ChainStep::Mail,
    ];

    /// Its task kind, queue and attempts.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) const fn step(self) -> Step {
        match self {
            ChainStep::Process => PROCESS,
            ChainStep::Render => RENDER,
            ChainStep::Sign => SIGN,
            ChainStep::Mail => MAIL,
        }
    }

    /// Its place in chain order.
    pub(crate) const fn position(self) -> usize {
        self as usize
    }
}

// On the plain array, so that what is kept per step stays an array (its users index it
// by position, iterate it, and build it with `try_into`) and reads by name as well.
impl<T> Index<ChainStep> for [T; 4] {
    type Output = T;

    fn index(&self, step: ChainStep) -> &T {
        &self[step.position()]
    }
}

impl<T> IndexMut<ChainStep> for [T; 4] {
    fn index_mut(&mut self, step: ChainStep) -> &mut T {
        &mut self[step.position()]
    }
}

#[cfg(test)]
mod tests {
    use super::super::STEPS;
    use super::*;

    #[test]
    fn the_named_steps_are_the_chain_order() {
        for (i, step) in ChainStep::ALL.into_iter().enumerate() {
            assert_eq!(step.position(), i);
            assert_eq!(STEPS[step], step.step());
        }
    }
}
