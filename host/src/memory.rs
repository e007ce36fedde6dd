//! Giving freed heap back to the operating system. glibc's allocator keeps memory it has freed
//! inside its arenas (fragmented between live allocations), so a host that cached 20,000
//! objects and then saw them deleted kept its peak resident size although every structure was
//! empty. `malloc_trim` releases the free pages; called periodically it costs a few
//! milliseconds. Other C libraries (musl, a static build) return memory on their own.
//!
//! Trimming returns only whole free pages, so the allocator is also told to keep large
//! allocations out of its arenas ([`configure`]).

use std::time::Duration;

/// Allocations of at least this size get their own mapping, returned to the system when freed.
const MMAP_THRESHOLD: usize = 4 << 20;

/// Sets the process's allocator policy; call once, before the first plugin is compiled.
///
/// glibc serves allocations above a threshold with their own `mmap`, but raises that threshold
/// (up to 32 MiB) each time such a mapping is freed. Compiling a plugin frees many large
/// buffers, so afterwards every allocation below 32 MiB came from the arenas, and compiling the
/// next one left them fragmented: with the ten idle plugins of `make bench`, 64 MiB of anonymous
/// memory stayed resident after trimming (a fixed 4 MiB threshold: 22 MiB; the whole process 90
/// -> 48 MiB). Setting the threshold fixes it where it is.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn configure() {
    // SAFETY: mallopt takes no pointers; glibc applies it under its own lock.
    #[allow(unsafe_code)]
    let set = unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD as libc::c_int) };
    if set == 0 {
        tracing::warn!(
            threshold = MMAP_THRESHOLD,
            "the allocator refused the mmap threshold; freed memory may stay resident"
        );
    }
}

/// Nothing to do: other C libraries keep no such threshold.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn configure() {}

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
