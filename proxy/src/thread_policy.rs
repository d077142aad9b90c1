//! The Linux scheduling policy of the threads that serve clients: `SCHED_BATCH` unless
//! `--cpu-policy normal`.
//!
//! Why: a relay thread does a few microseconds of work per statement and then waits for the
//! next packet. Under the default policy a waking thread preempts whatever runs on its CPU, so
//! when the cores are busy (the client, MariaDB and the proxy sharing them, as in every
//! benchmark on one host) each packet costs the proxy a sleep, a wakeup and a preemption of
//! the thread that sent it: measured on 2 cores with 32 clients, ~0.7-1.0 voluntary context
//! switches per query and ~4 us more CPU per query than HAProxy, whose threads stay busy and
//! are preempted instead of sleeping. A `SCHED_BATCH` thread does not preempt on wakeup: it
//! runs when the current thread's slice ends, finds the packets that arrived meanwhile and
//! relays them together. Measured (docs/benchmarks.md): the senders are preempted ~0.1 times
//! per query instead of 0.5-0.7, and Shoal's CPU per query falls in six of the bench's eight
//! cells (up to 8% closed, 22% paced), below HAProxy's in all. Its share of the CPU is
//! unchanged (same weight, same nice), and a thread that wakes on an idle CPU runs at once,
//! so on a host with spare cores nothing changes. Setting it needs no privilege.
//!
//! Linux copies a thread's policy to the threads it starts, so `main` calls [`apply_batch`]
//! once on its own thread (core 0) after starting the timer thread and before building the
//! runtime: every serving thread started afterwards (the other cores, the shared runtime's
//! workers) runs batch, and the timer thread keeps the default, so timeouts and health checks
//! fire on time. A proxy embedded in another program leaves that program's policy alone.

/// Puts the calling thread, and the threads it starts afterwards, under `SCHED_BATCH`. A
/// failure is logged and the threads keep the default policy: serving does not depend on it.
pub fn apply_batch() {
    if let Err(e) = set_batch() {
        tracing::warn!(error = %e, "cannot set SCHED_BATCH on the serving threads; they keep the default policy");
    }
}

#[cfg(target_os = "linux")]
fn set_batch() -> std::io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid sched_param for the call's duration; pid 0 is the calling
    // thread (Linux applies the policy per thread).
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
fn set_batch() -> std::io::Result<()> {
    Ok(())
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    fn policy_of_this_thread() -> i32 {
        // SAFETY: pid 0 is the calling thread.
        unsafe { libc::sched_getscheduler(0) }
    }

    #[test]
    fn apply_sets_batch_on_the_calling_thread_only() {
        let (inside, outside) = std::thread::spawn(|| {
            apply_batch();
            let inside = policy_of_this_thread();
            let outside = std::thread::spawn(policy_of_this_thread).join().unwrap();
            (inside, outside)
        })
        .join()
        .unwrap();
        assert_eq!(inside, libc::SCHED_BATCH);
        // A thread started afterwards inherits it: how the cores and workers get it.
        assert_eq!(outside, libc::SCHED_BATCH);
        assert_eq!(
            policy_of_this_thread(),
            libc::SCHED_OTHER,
            "the test thread is untouched"
        );
    }
}
