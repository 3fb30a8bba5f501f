perf stat -x, -a -e swiotlb:swiotlb_bounced -e block:block_rq_complete --filter 'dev == 271581184' -o /out/count.1.direct.csv -- dd if=/dev/nvme0n1 of=/dev/null bs=1M count=512 iflag=direct
