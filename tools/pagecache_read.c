// Page cache read costs on the host (docs/calibration.md, "4. Page cache reads"): the CPU of
// a 4 KiB pread(2) of a cached page (read_page_ns), the CPU a cold sequential read costs
// beyond a warm one (pagecache_add_page_ns), and the folios the kernel's readahead made
// (counted from /proc/self/pagemap and /proc/kpageflags, which need root).
// Build: cc -O2 -o /tmp/pagecache_read tools/pagecache_read.c
// Run:   /tmp/pagecache_read <file on the filesystem to measure> <pages> <passes>
//        (RANDOM_RA=1: POSIX_FADV_RANDOM, no readahead: order-0 folios, one read per page)
// The file is written, fsynced, and each pass evicts it with POSIX_FADV_DONTNEED (only this
// file's pages), reads it cold, then warm. The file is removed at the end.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
static double cpu(void){struct rusage r;getrusage(RUSAGE_THREAD,&r);return r.ru_utime.tv_sec+r.ru_utime.tv_usec/1e6+r.ru_stime.tv_sec+r.ru_stime.tv_usec/1e6;}
static double sys_(void){struct rusage r;getrusage(RUSAGE_THREAD,&r);return r.ru_stime.tv_sec+r.ru_stime.tv_usec/1e6;}
static double wall(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec/1e9;}
int main(int argc,char**argv){
  const char*path=argv[1]; long pages=atol(argv[2]); int reps=atoi(argv[3]);
  char buf[4096]; memset(buf,'x',4096);
  int fd=open(path,O_RDWR|O_CREAT|O_TRUNC,0600); if(fd<0){perror("open");return 1;}
  for(long i=0;i<pages;i++){ for(int k=0;k<4096;k+=64) buf[k]=(char)(i+k); if(pwrite(fd,buf,4096,i*4096)!=4096){perror("w");return 1;}}
  fsync(fd);
  for(int r=0;r<reps;r++){
    posix_fadvise(fd,0,0,POSIX_FADV_DONTNEED); if(getenv("RANDOM_RA")) posix_fadvise(fd,0,0,POSIX_FADV_RANDOM);
    { void*m=mmap(0,pages*4096,PROT_READ,MAP_SHARED,fd,0); unsigned char*v=malloc(pages); mincore(m,pages*4096,v); long c=0; for(long i=0;i<pages;i++) c+=v[i]&1; printf("resident after DONTNEED: %ld\n",c); munmap(m,pages*4096); free(v);}
    double c0=cpu(),s0=sys_(),w0=wall();
    for(long i=0;i<pages;i++) if(pread(fd,buf,4096,i*4096)!=4096){perror("r");return 1;}
    double c1=cpu(),s1=sys_(),w1=wall();
    for(long i=0;i<pages;i++) if(pread(fd,buf,4096,i*4096)!=4096){perror("r");return 1;}
    double c2=cpu(),s2=sys_(),w2=wall();
    long folios=0; int orders[12]={0};
    { unsigned char*m=mmap(0,pages*4096,PROT_READ,MAP_SHARED,fd,0); volatile unsigned char sink=0; for(long i=0;i<pages;i++) sink+=m[i*4096];
      int pm=open("/proc/self/pagemap",O_RDONLY), kf=open("/proc/kpageflags",O_RDONLY); long run=0;
      for(long i=0;i<pages;i++){ unsigned long long e=0,f=0; pread(pm,&e,8,((unsigned long)m/4096+i)*8); if(!(e>>63&1)){continue;}
        unsigned long long pfn=e&((1ULL<<55)-1); pread(kf,&f,8,pfn*8); int tail=(f>>16)&1; if(!tail){ if(i>0&&run>0){int o=0;while((1L<<o)<run)o++; orders[o]++;} folios++; run=1;} else run++; }
      {int o=0;while((1L<<o)<run)o++; orders[o]++;}
      close(pm); close(kf); munmap(m,pages*4096); }
    printf("folios %ld (orders:", folios); for(int o=0;o<12;o++) if(orders[o]) printf(" %d:%d",o,orders[o]); printf(") ");
    printf("cold cpu %.4f s (sys %.4f) wall %.4f | warm cpu %.4f s (sys %.4f) wall %.4f | warm %.0f ns/page, cold-warm %.0f ns/page\n",
      c1-c0,s1-s0,w1-w0,c2-c1,s2-s1,w2-w1,(c2-c1)/pages*1e9,((c1-c0)-(c2-c1))/pages*1e9);
  }
  close(fd); unlink(path); return 0;
}
