//! Rarely taken async paths, compiled apart from the hot one.
//!
//! An awaited async call becomes part of its caller's state machine, and in the whole-program
//! build its poll is usually inlined into the caller's: the code of every error, set-up and
//! recovery branch of a statement's path then sits between the instructions each statement
//! runs, and the path spans more instruction-cache lines than it executes (callgrind's cache
//! simulation of the routed point select: ~400 instruction-cache misses a query against ~90 in
//! quick mode). Awaited through [`cold`], a branch's future is boxed as a trait object: its
//! code stays in a function of its own, the caller's future holds a pointer instead of the
//! branch's state, and the allocation is made only when the branch is taken.

use std::future::Future;
use std::pin::Pin;

/// `f`, to be awaited out of line (see the module's comment). Only for branches a statement
/// rarely takes: each call allocates.
pub fn cold<'a, T>(
    f: impl Future<Output = T> + Send + 'a,
) -> Pin<Box<dyn Future<Output = T> + Send + 'a>> {
    Box::pin(f)
}
