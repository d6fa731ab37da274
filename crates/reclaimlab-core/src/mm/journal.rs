//! The journal an fsync(2) waits for: ext4's jbd2 in its default mode (data=ordered, barriers
//! on, no fast commit), as read in 6.12: fs/ext4/fsync.c (ext4_sync_file, ext4_fsync_journal),
//! fs/jbd2/commit.c (jbd2_journal_commit_transaction, journal_submit_commit_record), the
//! metadata a create and a block allocation dirty (fs/ext4/ialloc.c __ext4_new_inode,
//! fs/ext4/namei.c ext4_add_entry, fs/ext4/mballoc.c ext4_mb_mark_diskspace_used,
//! fs/ext4/inode.c ext4_dirty_inode) and the flush sequence of a REQ_PREFLUSH | REQ_FUA write
//! (block/blk-flush.c).
//!
//! Which filesystem journals is declared once, `FsType::jbd2` (mm/filemap.rs).
//!
//! The running transaction is the set of metadata blocks dirtied since the last commit
//! (t_buffers; a block dirtied twice is logged once). What dirties them:
//! * a create (ext4_create): the inode bitmap block of the new inode's group, the inode table
//!   block holding it, the group descriptor block, the directory block that takes the entry
//!   and the inode table block of the directory's inode (mtime, size);
//! * a write(2) (file_update_time → ext4_dirty_inode): the file's inode table block;
//! * delayed allocation at writeback (ext4_map_blocks from ext4_do_writepages) of a block
//!   the file never had: the block bitmap and group descriptor blocks of the block's group
//!   and the file's inode table block (its extent tree lives in the inode).
//!
//! ext4_sync_file writes and waits for the file's data (file_write_and_wait_range, the
//! caller), then, if the inode's last change is in a transaction not yet committed
//! (i_sync_tid), commits it and waits: the descriptor block and the metadata blocks go to the
//! journal (one bio each, under the commit's plug: consecutive journal blocks, so the block
//! layer merges them into requests of max_sectors_kb), jbd2 waits for them, then submits the
//! commit block with REQ_PREFLUSH | REQ_FUA and waits for it. On a device with a volatile
//! write cache that is a flush, the write and, without FUA, a second flush (blk-flush.c's
//! PREFLUSH, DATA, POSTFLUSH sequence); without one it is a plain write. If the inode's
//! transaction had already committed, only the flush (needs_barrier → blkdev_issue_flush).
//!
//! The log wraps (fs/jbd2/checkpoint.c, transaction.c, journal.c of 6.18): a committed
//! transaction's metadata blocks sit on its checkpoint list until they are written to their
//! home location; a block logged again by a later transaction moves to that one's list
//! (jbd2_journal_commit_transaction's __jbd2_journal_remove_checkpoint), and a list left
//! empty drops its transaction. The log's tail only moves past transactions whose lists are
//! empty. A handle start (start_this_handle → add_transaction_credits) that finds less than a
//! quarter of the journal free (jbd2_log_space_left: j_free less 32 blocks, against
//! j_max_transaction_buffers) waits for space (__jbd2_log_wait_for_space), in the caller's
//! context: jbd2_log_do_checkpoint first tries jbd2_cleanup_journal_tail, else writes the
//! oldest transaction's blocks home (__flush_batch, under a plug) and waits, then
//! jbd2_cleanup_journal_tail: a flush (blkdev_issue_flush: an empty REQ_PREFLUSH write, one
//! write and one flush in the device's stat), then the journal superblock with REQ_FUA (a
//! write and, without FUA, a post-flush; jbd2_write_superblock), waited for. A commit moves
//! the tail itself (jbd2_update_log_tail: the superblock only) when that frees at least
//! j_max_transaction_buffers blocks. In an fs_mark-like loop on a small ext4 (1 KiB blocks,
//! 4 inodes per inode table block) every fourth transaction keeps one block (the inode table
//! block its inode completed), so once the log has filled each wait writes one block and
//! moves the tail by about four transactions: a traced kernel run did exactly that
//! (docs/model/time.md#flushes-and-the-journal).
//!
//! The filesystem's geometry and journal size are mke2fs's for the lab's image
//! ([`Ext4Geometry::mke2fs`]): below 512 MiB 1 KiB blocks, 8192 blocks and about 2000 inodes
//! a group, 4 inodes a 1 KiB inode table block; above, 4 KiB blocks.
//!
//! Simplified: the commit runs on the fsync caller's clock without CPU cost (the kernel's
//! jbd2 thread does it while the caller sleeps); no periodic commit every commit interval
//! (5 s) by the jbd2 thread (a create loop's fsyncs commit everything first); the
//! flusher's writeback of the checkpointed blocks once they are older than
//! dirty_expire_centisecs (30 s; the model's runs are shorter, and only checkpointing
//! writes them); only a create and a write(2) start a handle that may wait for space (the
//! writeback's allocation handle does not); the home blocks of a checkpoint batch merge into
//! one request only for consecutive inode table blocks; data=ordered's wait for other
//! inodes' data in the transaction is left out (the fsync caller has written and waited for
//! its own); every entry of a directory goes to one directory block; a file's blocks are
//! allocated at its device offsets (the model lays files out one after another); a
//! filesystem without a known size (a lowered config without `image_bytes`) has mke2fs's
//! default 4 KiB layout and a journal that never fills.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::{Ctx, Mm};
use crate::block::Dir;
use crate::sim::Time;

/// EXT4_FIRST_INO: the first inode number for files (11 is lost+found, made by mkfs).
const EXT4_FIRST_INO: u64 = 12;
/// EXT4_ROOT_INO: the root directory, where the lab's runner makes its files.
const EXT4_ROOT_INO: u64 = 2;
/// mke2fs.conf's inode_size (every type but floppy, which no lab image is).
const INODE_SIZE: u64 = 256;
/// 64-byte group descriptors (the 64bit feature).
const DESC_SIZE: u64 = 64;
/// jbd2_log_space_left's allowance "for rounding errors" (blocks).
const LOG_SPACE_SLACK: u64 = 32;
/// A journal descriptor block's header (12 bytes) and checksum tail (4), and one block tag
/// with csum v3 (16 bytes; ext4's metadata_csum journals with csum v3).
const DESCRIPTOR_OVERHEAD: u64 = 12 + 4;
const TAG_BYTES: u64 = 16;
/// mke2fs.conf's "small" type: filesystems under 512 MiB.
const SMALL_FS_BYTES: u64 = 512 << 20;

/// What mke2fs (e2fsprogs 1.47 with its default mke2fs.conf) makes of a device: the layout
/// the journal's metadata blocks come from, and the journal's size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ext4Geometry {
    pub block_size: u64,
    pub blocks_per_group: u64,
    pub inodes_per_group: u64,
    /// The journal's blocks (ext2fs_default_journal_size); None: the filesystem's size is
    /// not known and its journal never fills.
    pub journal_blocks: Option<u64>,
}

impl Default for Ext4Geometry {
    /// mke2fs's "default" type (4 KiB blocks, inode_ratio 16 KiB: 8192 inodes in a group of
    /// 128 MiB), journal size unknown.
    fn default() -> Self {
        Ext4Geometry {
            block_size: 4096,
            blocks_per_group: 8 * 4096,
            inodes_per_group: 8192,
            journal_blocks: None,
        }
    }
}

impl Ext4Geometry {
    /// mke2fs on `bytes`: the type by size (mke2fs.conf: "small" below 512 MiB, 1 KiB blocks
    /// and inode_ratio 4096; "default" from there, 4 KiB and 16384), 8 × block size blocks a
    /// group, the inode count (size / inode_ratio) spread over the groups, rounded up to
    /// whole inode table blocks and down to a multiple of 8 (ext2fs_initialize), and the
    /// journal by the block count (ext2fs_default_journal_size).
    pub fn mke2fs(bytes: u64) -> Self {
        let (block_size, inode_ratio) = if bytes < SMALL_FS_BYTES {
            (1024, 4096)
        } else {
            (4096, 16384)
        };
        let blocks = bytes / block_size;
        let first_data_block = u64::from(block_size == 1024);
        let blocks_per_group = 8 * block_size;
        let groups = (blocks - first_data_block)
            .div_ceil(blocks_per_group)
            .max(1);
        let ipg = (bytes / inode_ratio).div_ceil(groups);
        let table_blocks = (ipg * INODE_SIZE).div_ceil(block_size);
        let inodes_per_group = (table_blocks * block_size / INODE_SIZE) & !7;
        Ext4Geometry {
            block_size,
            blocks_per_group,
            inodes_per_group: inodes_per_group.clamp(8, blocks_per_group),
            journal_blocks: default_journal_blocks(blocks),
        }
    }

    fn inodes_per_block(&self) -> u64 {
        self.block_size / INODE_SIZE
    }

    fn descs_per_block(&self) -> u64 {
        self.block_size / DESC_SIZE
    }

    /// Block tags in one descriptor block.
    fn tags_per_descriptor(&self) -> u64 {
        (self.block_size - DESCRIPTOR_OVERHEAD) / TAG_BYTES
    }

    /// Filesystem blocks in a 4 KiB page.
    pub fn blocks_per_page(&self) -> u64 {
        (super::PAGE_SIZE / self.block_size).max(1)
    }
}

/// ext2fs_default_journal_size (e2fsprogs 1.47): journal blocks for a filesystem of
/// `blocks` blocks; None below 2048 blocks (no journal).
fn default_journal_blocks(blocks: u64) -> Option<u64> {
    const K: u64 = 1024;
    Some(match blocks {
        b if b < 2048 => return None,
        b if b < 32768 => 1024,
        b if b < 256 * K => 4096,
        b if b < 512 * K => 8192,
        b if b < 4096 * K => 16384,
        b if b < 8192 * K => 32768,
        b if b < 16384 * K => 65536,
        b if b < 32768 * K => 131072,
        _ => 262144,
    })
}

/// A metadata block of an ext4 filesystem, by what it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum MetaBlock {
    /// The inode table block holding inode `ino / inodes_per_block`.
    InodeTable(u64),
    InodeBitmap(u64),
    BlockBitmap(u64),
    /// The block of group descriptors of groups `g / descs_per_block`.
    GroupDesc(u64),
    /// A directory's block: (directory inode, block index).
    Dir(u64, u64),
}

/// A filesystem's jbd2 journal (journal_t): its running transaction, commit sequence, the
/// committed transactions still in the log and their checkpoint lists.
#[derive(Clone, Debug, Default)]
pub struct Jbd2 {
    pub geom: Ext4Geometry,
    /// The running transaction's metadata blocks (t_buffers).
    pub running: BTreeSet<MetaBlock>,
    /// j_commit_sequence: transactions committed (the running one is this + 1).
    pub committed: u64,
    /// The committed transactions between the log's tail and head, oldest first: (tid,
    /// blocks they take in the log, commit block included).
    log: VecDeque<(u64, u64)>,
    /// Blocks in the log (the sum over `log`).
    log_used: u64,
    /// Checkpoint lists (t_checkpoint_list) by tid: blocks logged and not yet written home.
    checkpoint: BTreeMap<u64, BTreeSet<MetaBlock>>,
    /// Each such block's list (jh->b_cp_transaction).
    cp_of: BTreeMap<MetaBlock, u64>,
    /// Checkpoints that wrote blocks home (jbd2_log_do_checkpoint past its first
    /// jbd2_cleanup_journal_tail) and log tail updates (__jbd2_update_log_tail): for tests.
    pub checkpoints: u64,
    pub tail_updates: u64,
}

impl Jbd2 {
    pub fn new(geom: Ext4Geometry) -> Self {
        Jbd2 {
            geom,
            ..Jbd2::default()
        }
    }

    /// The running transaction's tid.
    fn running_tid(&self) -> u64 {
        self.committed + 1
    }

    /// jbd2_log_space_left: j_free less the slack (no transaction is committing when a
    /// handle starts: the model commits on the fsync caller's clock); None: never fills.
    fn space_left(&self) -> Option<u64> {
        let total = self.geom.journal_blocks?;
        // j_first = 1 (block 0 is the journal superblock), j_last = the journal's blocks.
        let free = (total - 1).saturating_sub(self.log_used);
        Some(free.saturating_sub(LOG_SPACE_SLACK))
    }

    /// j_max_transaction_buffers (jbd2_journal_get_max_txn_bufs): a quarter of the journal.
    fn max_transaction_buffers(&self) -> u64 {
        self.geom.journal_blocks.map_or(0, |n| n / 4)
    }

    /// jbd2_journal_get_log_tail: the oldest transaction still needed, the first on a
    /// checkpoint list, else `otherwise` (the committing or running one); and the blocks the
    /// tail would free moving there.
    fn log_tail(&self, otherwise: u64) -> (u64, u64) {
        let tid = self.checkpoint.keys().next().copied().unwrap_or(otherwise);
        let freed = self
            .log
            .iter()
            .take_while(|&&(t, _)| t < tid)
            .map(|&(_, n)| n)
            .sum();
        (tid, freed)
    }

    /// The log's tail moves to `tid`: the transactions before it leave the log.
    fn move_tail(&mut self, tid: u64) {
        while let Some(&(t, n)) = self.log.front() {
            if t >= tid {
                break;
            }
            self.log.pop_front();
            self.log_used -= n;
        }
        self.tail_updates += 1;
    }

    /// A committed transaction `tid`'s blocks join its checkpoint list, leaving an older
    /// one's (which is dropped once empty).
    fn insert_checkpoint(&mut self, tid: u64, blocks: &BTreeSet<MetaBlock>) {
        for &b in blocks {
            if let Some(old) = self.cp_of.insert(b, tid) {
                if let Some(list) = self.checkpoint.get_mut(&old) {
                    list.remove(&b);
                    if list.is_empty() {
                        self.checkpoint.remove(&old);
                    }
                }
            }
        }
        if !blocks.is_empty() {
            self.checkpoint.insert(tid, blocks.clone());
        }
    }
}

/// Per inode: what the journal needs of it.
#[derive(Clone, Debug, Default)]
pub struct InodeJournal {
    /// The inode number, once the model knows it (a file made before the run gets one when its
    /// metadata is first dirtied).
    pub ino: Option<u64>,
    /// i_sync_tid: the transaction of its last metadata change (0: none since the run began).
    pub sync_tid: u64,
    /// Made during the run (a create_files file): its blocks are allocated at writeback;
    /// blocks below `allocated` (pages) are. Files made before the run have all their blocks.
    pub created: bool,
    pub allocated: u64,
}

impl Mm {
    /// The filesystem of file region `region` if it journals with jbd2 (None also for a
    /// tmpfs or anonymous region).
    fn jbd2_fs(&self, region: usize) -> Option<usize> {
        let fs = self.regions[region].file.as_ref()?.fs as usize;
        self.fs[fs].fstype.jbd2().then_some(fs)
    }

    /// File region `region`'s inode number: the ones after lost+found, in region order over
    /// the files of its filesystem.
    fn ext4_ino(&mut self, region: usize, fs: usize) -> u64 {
        if let Some(ino) = self.regions[region]
            .file
            .as_ref()
            .and_then(|f| f.journal.ino)
        {
            return ino;
        }
        let before = self.regions[..region]
            .iter()
            .filter(|r| r.file.as_ref().is_some_and(|f| f.fs as usize == fs))
            .count() as u64;
        let ino = EXT4_FIRST_INO + before;
        self.file_journal(region).ino = Some(ino);
        ino
    }

    fn file_journal(&mut self, region: usize) -> &mut InodeJournal {
        &mut self.regions[region]
            .file
            .as_mut()
            .expect("a file region")
            .journal
    }

    /// Dirty `blocks` in the running transaction on behalf of `region`'s inode.
    fn jbd2_dirty(&mut self, region: usize, fs: usize, blocks: &[MetaBlock]) {
        let j = &mut self.fs[fs].journal;
        j.running.extend(blocks.iter().copied());
        let tid = j.running_tid();
        self.file_journal(region).sync_tid = tid;
    }

    /// The inode table block of inode `ino` on filesystem `fs`.
    fn inode_block(&self, fs: usize, ino: u64) -> MetaBlock {
        MetaBlock::InodeTable((ino - 1) / self.fs[fs].journal.geom.inodes_per_block())
    }

    /// ext4_create of file region `region` (open(2) with O_CREAT of a new file): its handle
    /// (which may wait for log space), a new inode (__ext4_new_inode) and its directory entry
    /// (ext4_add_entry) in the root directory.
    pub fn ext4_create(&mut self, ctx: &mut Ctx, region: usize) {
        let Some(fs) = self.jbd2_fs(region) else {
            return;
        };
        self.jbd2_start_handle(ctx, fs);
        let ino = self.ext4_ino(region, fs);
        let g = self.fs[fs].journal.geom;
        let group = (ino - 1) / g.inodes_per_group;
        let j = self.file_journal(region);
        j.created = true;
        j.allocated = 0;
        let blocks = [
            MetaBlock::InodeBitmap(group),
            self.inode_block(fs, ino),
            MetaBlock::GroupDesc(group / g.descs_per_block()),
            MetaBlock::Dir(EXT4_ROOT_INO, 0),
            self.inode_block(fs, EXT4_ROOT_INO),
        ];
        self.jbd2_dirty(region, fs, &blocks);
    }

    /// ext4_dirty_inode from a write(2)'s file_update_time: its handle (which may wait for
    /// log space), the inode's table block.
    pub fn ext4_dirty_inode(&mut self, ctx: &mut Ctx, region: usize) {
        let Some(fs) = self.jbd2_fs(region) else {
            return;
        };
        self.jbd2_start_handle(ctx, fs);
        let ino = self.ext4_ino(region, fs);
        let b = self.inode_block(fs, ino);
        self.jbd2_dirty(region, fs, &[b]);
    }

    /// Delayed allocation of page `index` of file region `region` at writeback: a block the
    /// file never had dirties its group's block bitmap and descriptor and the inode.
    pub fn ext4_map_blocks(&mut self, region: usize, index: u64) {
        let Some(fs) = self.jbd2_fs(region) else {
            return;
        };
        let j = &self.regions[region]
            .file
            .as_ref()
            .expect("a file region")
            .journal;
        if !j.created || index < j.allocated {
            return;
        }
        let g = self.fs[fs].journal.geom;
        let page = self.regions[region].file.as_ref().expect("a file").dev_off + index;
        let group = page * g.blocks_per_page() / g.blocks_per_group;
        let ino = self.ext4_ino(region, fs);
        self.file_journal(region).allocated = index + 1;
        let blocks = [
            MetaBlock::BlockBitmap(group),
            MetaBlock::GroupDesc(group / g.descs_per_block()),
            self.inode_block(fs, ino),
        ];
        self.jbd2_dirty(region, fs, &blocks);
    }

    /// ext4_fsync_journal after the data: commit the inode's transaction if it has not been
    /// (jbd2_complete_transaction), else only a flush (needs_barrier); the caller sleeps until
    /// it is done.
    pub fn ext4_fsync_journal(&mut self, ctx: &mut Ctx, region: usize) {
        let Some(fs) = self.jbd2_fs(region) else {
            return;
        };
        let tid = self.regions[region]
            .file
            .as_ref()
            .expect("a file region")
            .journal
            .sync_tid;
        if tid > self.fs[fs].journal.committed && !self.fs[fs].journal.running.is_empty() {
            self.jbd2_journal_commit_transaction(ctx, fs);
        } else if let Some(done) = self.fs[fs].bdev.blkdev_issue_flush(ctx.now) {
            self.psi_sleep(ctx, done);
        }
    }

    /// Write `n` journal blocks of filesystem `fs` (one bio each, consecutive: merged into
    /// requests of max_sectors_kb); their completion.
    fn jbd2_write_log_blocks(&mut self, now: Time, fs: usize, n: u64) -> Time {
        let bs = self.fs[fs].journal.geom.block_size;
        let bdev = &mut self.fs[fs].bdev;
        let per_request = bdev
            .max_request_pages()
            .map_or(1, |p| p as u64 * super::PAGE_SIZE / bs);
        let mut done = now;
        let mut left = n;
        while left > 0 {
            let k = left.min(per_request);
            let pages = (k * bs).div_ceil(super::PAGE_SIZE);
            done = done.max(bdev.issue_blocks(now, Dir::Write, pages, k));
            left -= k;
        }
        // submit_bio counts every write bio's KiB (PGPGOUT), metadata included.
        self.vm.pgpgout += self.fs[fs].bdev.pgpg_kib(n * bs);
        done
    }

    /// A REQ_FUA write of one block (the commit block, the journal superblock): the write,
    /// then on a device with a volatile cache and no FUA the post-flush; its completion.
    fn jbd2_write_fua(&mut self, now: Time, fs: usize) -> Time {
        let bs = self.fs[fs].journal.geom.block_size;
        let bdev = &mut self.fs[fs].bdev;
        let write = bdev.issue_blocks(now, Dir::Write, 1, 1);
        let done = bdev.issue_flush(write).unwrap_or(write);
        self.vm.pgpgout += bdev.pgpg_kib(bs);
        done
    }

    /// jbd2_journal_commit_transaction of filesystem `fs`'s running transaction, waited for.
    fn jbd2_journal_commit_transaction(&mut self, ctx: &mut Ctx, fs: usize) {
        let j = &mut self.fs[fs].journal;
        let tid = j.running_tid();
        let blocks = std::mem::take(&mut j.running);
        let n = blocks.len() as u64;
        // The descriptor block(s): one tag per metadata block.
        let logged = n + n.div_ceil(j.geom.tags_per_descriptor());
        // The tail before this transaction joins the checkpoint lists (jbd2_journal_get_log_tail
        // with it committing): moved here only if that frees a quarter of the journal.
        let (tail, freed) = j.log_tail(tid);
        let update_tail = j.geom.journal_blocks.is_some()
            && tail > j.log.front().map_or(tail, |&(t, _)| t)
            && freed >= j.max_transaction_buffers();
        let done = self.jbd2_write_log_blocks(ctx.now, fs, logged);
        self.psi_sleep(ctx, done);
        // journal_submit_commit_record: REQ_PREFLUSH | REQ_FUA.
        let pre = self.fs[fs].bdev.issue_flush(ctx.now);
        let done = self.jbd2_write_fua(pre.unwrap_or(ctx.now).max(ctx.now), fs);
        self.psi_sleep(ctx, done);
        let j = &mut self.fs[fs].journal;
        j.committed = tid;
        j.log.push_back((tid, logged + 1));
        j.log_used += logged + 1;
        j.insert_checkpoint(tid, &blocks);
        if update_tail {
            // jbd2_update_log_tail: the journal superblock with REQ_FUA, no flush before it
            // (the commit block's REQ_PREFLUSH covered the checkpointed blocks).
            let done = self.jbd2_write_fua(ctx.now, fs);
            self.psi_sleep(ctx, done);
            self.fs[fs].journal.move_tail(tail);
        }
    }

    /// start_this_handle's add_transaction_credits: with less than j_max_transaction_buffers
    /// of the log free, __jbd2_log_wait_for_space, in the caller's context.
    fn jbd2_start_handle(&mut self, ctx: &mut Ctx, fs: usize) {
        loop {
            let j = &self.fs[fs].journal;
            match j.space_left() {
                Some(left) if left < j.max_transaction_buffers() => {}
                _ => return,
            }
            let progressed = if j.checkpoint.is_empty() {
                self.jbd2_cleanup_journal_tail(ctx, fs)
            } else {
                self.jbd2_log_do_checkpoint(ctx, fs);
                true
            };
            if !progressed {
                // Nothing in the log to free: the kernel aborts the journal here; the model's
                // journal always has its running transaction's room.
                return;
            }
        }
    }

    /// jbd2_cleanup_journal_tail: if the oldest transaction still needed is past the tail, a
    /// flush, then the journal superblock with the new tail (REQ_FUA), waited for. Whether
    /// the tail moved.
    fn jbd2_cleanup_journal_tail(&mut self, ctx: &mut Ctx, fs: usize) -> bool {
        let j = &self.fs[fs].journal;
        let (tail, _) = j.log_tail(j.running_tid());
        if j.log.front().is_none_or(|&(t, _)| tail <= t) {
            return false;
        }
        let flushed = self.fs[fs]
            .bdev
            .blkdev_issue_flush(ctx.now)
            .unwrap_or(ctx.now);
        self.psi_sleep(ctx, flushed);
        let done = self.jbd2_write_fua(ctx.now, fs);
        self.psi_sleep(ctx, done);
        self.fs[fs].journal.move_tail(tail);
        true
    }

    /// jbd2_log_do_checkpoint: the tail first (jbd2_cleanup_journal_tail); else the oldest
    /// transaction's blocks are written home in one plugged batch (__flush_batch) and waited
    /// for, the transaction dropped, and the tail moved.
    fn jbd2_log_do_checkpoint(&mut self, ctx: &mut Ctx, fs: usize) {
        if self.jbd2_cleanup_journal_tail(ctx, fs) {
            return;
        }
        let j = &mut self.fs[fs].journal;
        let Some((_, blocks)) = j.checkpoint.pop_first() else {
            return;
        };
        j.checkpoints += 1;
        for b in &blocks {
            j.cp_of.remove(b);
        }
        let bs = j.geom.block_size;
        let mut done = ctx.now;
        let mut prev: Option<MetaBlock> = None;
        let mut run = 0u64;
        let flush_run = |mm: &mut Mm, run: u64, done: &mut Time| {
            if run > 0 {
                let pages = (run * bs).div_ceil(super::PAGE_SIZE);
                *done = (*done).max(mm.fs[fs].bdev.issue_blocks(ctx.now, Dir::Write, pages, run));
                mm.vm.pgpgout += mm.fs[fs].bdev.pgpg_kib(run * bs);
            }
        };
        for &b in &blocks {
            let adjacent = matches!((prev, b), (Some(MetaBlock::InodeTable(a)), MetaBlock::InodeTable(c)) if c == a + 1);
            if !adjacent {
                flush_run(self, run, &mut done);
                run = 0;
            }
            run += 1;
            prev = Some(b);
        }
        flush_run(self, run, &mut done);
        self.psi_sleep(ctx, done);
        self.jbd2_cleanup_journal_tail(ctx, fs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mke2fs_geometry_matches_the_lab_images() {
        // A 313 MiB image traced on this host (dumpe2fs -h): 1 KiB blocks, 8192 blocks and
        // 2000 inodes a group, an 8192-block journal.
        let small = Ext4Geometry::mke2fs(313 << 20);
        assert_eq!(
            small,
            Ext4Geometry {
                block_size: 1024,
                blocks_per_group: 8192,
                inodes_per_group: 2000,
                journal_blocks: Some(8192),
            }
        );
        assert_eq!(small.inodes_per_block(), 4);
        assert_eq!(small.tags_per_descriptor(), 63);
        assert_eq!(small.blocks_per_page(), 4);
        // calibrate's 768 MiB loop device image: 4 KiB blocks, a 4096-block journal.
        let big = Ext4Geometry::mke2fs(768 << 20);
        assert_eq!((big.block_size, big.journal_blocks), (4096, Some(4096)));
        assert_eq!(big.inodes_per_group, 8192);
        assert_eq!(big.inodes_per_block(), 16);
    }

    #[test]
    fn a_block_logged_again_leaves_its_older_checkpoint_list() {
        let mut j = Jbd2::new(Ext4Geometry::mke2fs(313 << 20));
        let a: BTreeSet<_> = [MetaBlock::InodeTable(3), MetaBlock::Dir(2, 0)].into();
        let b: BTreeSet<_> = [MetaBlock::Dir(2, 0)].into();
        j.insert_checkpoint(1, &a);
        j.insert_checkpoint(2, &b);
        j.log.extend([(1, 4), (2, 3)]);
        j.log_used = 7;
        // Transaction 1 keeps the inode table block: the tail stays at it.
        assert_eq!(j.log_tail(3), (1, 0));
        j.insert_checkpoint(3, &[MetaBlock::InodeTable(3)].into());
        // Both of 1's blocks were logged again: 1 is dropped, the tail may pass it.
        assert_eq!(j.log_tail(4), (2, 4));
        j.move_tail(2);
        assert_eq!((j.log.len(), j.log_used), (1, 3));
    }
}
