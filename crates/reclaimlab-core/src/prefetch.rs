//! A cache prefetch hint, for the access loop's look-ahead (sched.rs): the page records, links,
//! swap map entries and zsmalloc handles that upcoming accesses will touch are loaded while
//! the current ones run. A hint only: it never changes a result.

/// Start loading `r` into the cache.
#[inline(always)]
pub(crate) fn prefetch<T>(r: &T) {
    // SAFETY: SSE is part of every x86_64 target, and a prefetch never faults nor changes
    // memory, whatever the address.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
            std::ptr::from_ref(r).cast(),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = r;
}
