//! Policy is data: every behaviour that a kernel version or a seed patch changes is a named
//! switch, and a kernel-version preset sets them all. A scenario overrides single switches on
//! top of its preset (`[kernel.switches]`). docs/model/switches.md lists them with the patches
//! they come from.

use std::collections::BTreeMap;

use serde_json::Value;

/// What zswap does with a page that does not compress below PAGE_SIZE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Incompressible {
    /// ≤6.17: zsmalloc refuses objects over 4096 bytes → reject_compress_poor, page goes to disk.
    Reject,
    /// 6.18 (SeongJae Park, "mm/zswap: store <PAGE_SIZE compression failed page as-is"): the page
    /// is stored raw (length 4096) unless the memcg's zswap writeback is disabled.
    StoreRaw,
}

/// Where pages whose 8-byte words are all equal go at swap-out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SameFilled {
    /// ≤6.11: zswap keeps same-filled pages as length-0 entries (same_filled_pages), no zpool
    /// memory, not on the zswap LRU.
    Zswap,
    /// 6.12+ (Usama Arif): zero-filled pages go to the swap zeromap (swpout_zero/swpin_zero) and
    /// never reach zswap; other same-filled pages are compressed like any page.
    Zeromap,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Switches {
    pub incompressible: Incompressible,
    pub same_filled: SameFilled,
}

/// Kernel versions with a preset.
pub const PRESETS: &[&str] = &["6.12", "6.18"];

impl Switches {
    pub fn preset(version: &str) -> Result<Switches, String> {
        match version {
            "6.18" => Ok(Switches { incompressible: Incompressible::StoreRaw, same_filled: SameFilled::Zeromap }),
            "6.12" => Ok(Switches { incompressible: Incompressible::Reject, same_filled: SameFilled::Zeromap }),
            _ => Err(format!(
                "kernel.version: no preset for {version:?}; expected one of {}",
                PRESETS.iter().map(|p| format!("{p:?}")).collect::<Vec<_>>().join(", ")
            )),
        }
    }

    /// The switches as name → value, in the form scenarios write them.
    pub fn to_map(&self) -> BTreeMap<&'static str, Value> {
        let mut m = BTreeMap::new();
        m.insert(
            "zswap.incompressible",
            Value::from(match self.incompressible {
                Incompressible::Reject => "reject",
                Incompressible::StoreRaw => "store_raw",
            }),
        );
        m.insert(
            "zswap.same_filled",
            Value::from(match self.same_filled {
                SameFilled::Zswap => "zswap",
                SameFilled::Zeromap => "zeromap",
            }),
        );
        m
    }

    pub fn with_overrides(version: &str, overrides: &BTreeMap<String, Value>) -> Result<Switches, String> {
        let mut s = Switches::preset(version)?;
        for (k, v) in overrides {
            let bad = |expected: &str| format!("kernel.switches.{k}: expected {expected}, got {v}");
            match k.as_str() {
                "zswap.incompressible" => {
                    s.incompressible = match v.as_str() {
                        Some("reject") => Incompressible::Reject,
                        Some("store_raw") => Incompressible::StoreRaw,
                        _ => return Err(bad("\"reject\" or \"store_raw\"")),
                    }
                }
                "zswap.same_filled" => {
                    s.same_filled = match v.as_str() {
                        Some("zswap") => SameFilled::Zswap,
                        Some("zeromap") => SameFilled::Zeromap,
                        _ => return Err(bad("\"zswap\" or \"zeromap\"")),
                    }
                }
                _ => {
                    return Err(format!(
                        "kernel.switches.{k}: unknown switch; known: {}",
                        s.to_map().keys().copied().collect::<Vec<_>>().join(", ")
                    ))
                }
            }
        }
        Ok(s)
    }
}
