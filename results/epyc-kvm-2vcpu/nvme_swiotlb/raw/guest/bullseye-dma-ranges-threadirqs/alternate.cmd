python3 /job/alternate.py --mib 256 --rounds 7 /dev/nvme0n1 /dev/vda
