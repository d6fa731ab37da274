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
//! Simplified: the commit runs on the fsync caller's clock (the kernel's jbd2 thread does it
//! and the caller sleeps until it is done; its CPU time is not charged); no periodic commit
//! every commit interval (5 s) by the jbd2 thread, so metadata that no fsync commits is never
//! written; no checkpointing (the metadata blocks' writes to their home location once the
//! journal fills); data=ordered's wait for other inodes' data in the transaction is left
//! out (the fsync caller has written and waited for its own); one block group layout (ext4's
//! defaults for 4 KiB blocks: 32768 blocks and 8192 inodes per group, 256-byte inodes, 64-byte
//! group descriptors); every entry of a directory goes to one directory block; a file's
//! blocks are allocated at its device offsets (the model lays files out one after another).

use std::collections::BTreeSet;

use super::{Ctx, Mm};
use crate::block::Dir;

/// EXT4_FIRST_INO: the first inode number for files (11 is lost+found, made by mkfs).
const EXT4_FIRST_INO: u64 = 12;
/// EXT4_ROOT_INO: the root directory, where the lab's runner makes its files.
const EXT4_ROOT_INO: u64 = 2;
/// 4 KiB blocks per group (EXT4_BLOCKS_PER_GROUP: 8 × block size).
const BLOCKS_PER_GROUP: u64 = 8 * 4096;
/// mkfs.ext4's default inode_ratio of 16 KiB: 8192 inodes in a group of 128 MiB.
const INODES_PER_GROUP: u64 = BLOCKS_PER_GROUP * 4096 / 16384;
/// 256-byte inodes (mkfs.ext4's default inode_size) in a 4 KiB block.
const INODES_PER_BLOCK: u64 = 4096 / 256;
/// 64-byte group descriptors (the 64bit feature) in a 4 KiB block.
const DESCS_PER_BLOCK: u64 = 4096 / 64;

/// A metadata block of an ext4 filesystem, by what it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum MetaBlock {
    /// The inode table block holding inode `ino / INODES_PER_BLOCK`.
    InodeTable(u64),
    InodeBitmap(u64),
    BlockBitmap(u64),
    /// The block of group descriptors of groups `g / DESCS_PER_BLOCK`.
    GroupDesc(u64),
    /// A directory's block: (directory inode, block index).
    Dir(u64, u64),
}

/// A filesystem's jbd2 journal (journal_t): its running transaction and commit sequence.
#[derive(Clone, Debug, Default)]
pub struct Jbd2 {
    /// The running transaction's metadata blocks (t_buffers).
    pub running: BTreeSet<MetaBlock>,
    /// j_commit_sequence: transactions committed (the running one is this + 1).
    pub committed: u64,
}

impl Jbd2 {
    /// The running transaction's tid.
    fn running_tid(&self) -> u64 {
        self.committed + 1
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

    /// ext4_create of file region `region` (open(2) with O_CREAT of a new file): a new inode
    /// (__ext4_new_inode) and its directory entry (ext4_add_entry) in the root directory.
    pub fn ext4_create(&mut self, region: usize) {
        let Some(fs) = self.jbd2_fs(region) else {
            return;
        };
        let ino = self.ext4_ino(region, fs);
        let group = (ino - 1) / INODES_PER_GROUP;
        let j = self.file_journal(region);
        j.created = true;
        j.allocated = 0;
        self.jbd2_dirty(
            region,
            fs,
            &[
                MetaBlock::InodeBitmap(group),
                MetaBlock::InodeTable((ino - 1) / INODES_PER_BLOCK),
                MetaBlock::GroupDesc(group / DESCS_PER_BLOCK),
                MetaBlock::Dir(EXT4_ROOT_INO, 0),
                MetaBlock::InodeTable((EXT4_ROOT_INO - 1) / INODES_PER_BLOCK),
            ],
        );
    }

    /// ext4_dirty_inode from a write(2)'s file_update_time: the inode's table block.
    pub fn ext4_dirty_inode(&mut self, region: usize) {
        let Some(fs) = self.jbd2_fs(region) else {
            return;
        };
        let ino = self.ext4_ino(region, fs);
        self.jbd2_dirty(
            region,
            fs,
            &[MetaBlock::InodeTable((ino - 1) / INODES_PER_BLOCK)],
        );
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
        let block = self.regions[region].file.as_ref().expect("a file").dev_off + index;
        let group = block / BLOCKS_PER_GROUP;
        let ino = self.ext4_ino(region, fs);
        self.file_journal(region).allocated = index + 1;
        self.jbd2_dirty(
            region,
            fs,
            &[
                MetaBlock::BlockBitmap(group),
                MetaBlock::GroupDesc(group / DESCS_PER_BLOCK),
                MetaBlock::InodeTable((ino - 1) / INODES_PER_BLOCK),
            ],
        );
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
        } else if let Some(done) = self.fs[fs].bdev.issue_flush(ctx.now) {
            // blkdev_issue_flush.
            self.psi_sleep(ctx, done);
        }
    }

    /// jbd2_journal_commit_transaction of filesystem `fs`'s running transaction, waited for.
    fn jbd2_journal_commit_transaction(&mut self, ctx: &mut Ctx, fs: usize) {
        let blocks = std::mem::take(&mut self.fs[fs].journal.running).len() as u64;
        // The descriptor block(s): one tag per metadata block (16 bytes with csum v3) after
        // its 12-byte header and before its 4-byte tail.
        let per_descriptor = (4096 - 12 - 4) / 16;
        let logged = blocks + blocks.div_ceil(per_descriptor);
        let bdev = &mut self.fs[fs].bdev;
        // One bio per block, merged into requests of at most max_sectors_kb.
        let per_request = bdev.max_request_pages().map_or(1, |n| n as u64);
        let mut done = ctx.now;
        let mut left = logged;
        while left > 0 {
            let n = left.min(per_request);
            done = done.max(bdev.issue_blocks(ctx.now, Dir::Write, n, n));
            left -= n;
        }
        self.psi_sleep(ctx, done);
        // journal_submit_commit_record: REQ_PREFLUSH | REQ_FUA.
        let bdev = &mut self.fs[fs].bdev;
        let pre = bdev.issue_flush(ctx.now);
        let write = bdev.issue_blocks(pre.unwrap_or(ctx.now).max(ctx.now), Dir::Write, 1, 1);
        let post = pre.and_then(|_| bdev.issue_flush(write));
        self.psi_sleep(ctx, post.unwrap_or(write));
        self.fs[fs].journal.committed += 1;
        // submit_bio counts every write bio's KiB (PGPGOUT), metadata included.
        self.vm.pgpgout += (logged + 1) * 4;
    }
}
