//! Giving freed heap back to the operating system. glibc's allocator keeps memory it has freed
//! inside its arenas (fragmented between live allocations), so a host that cached 20,000
//! objects and then saw them deleted kept its peak resident size although every structure was
//! empty. `malloc_trim` releases the free pages; called periodically it costs a few
//! milliseconds. Other C libraries (musl, a static build) return memory on their own.

use std::time::Duration;

/// Trims the heap every `every`, forever.
pub async fn return_freed_memory(every: Duration) {
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        trim();
    }
}

/// Returns the heap's free pages to the operating system now (benchmarks trim before reading
/// the resident size, so they measure what is held, not what the allocator kept).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn trim() {
    // SAFETY: malloc_trim takes no pointers and is thread-safe; glibc locks each arena while it
    // releases that arena's free pages.
    #[allow(unsafe_code)]
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Nothing to do: other C libraries return freed memory on their own.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn trim() {}
