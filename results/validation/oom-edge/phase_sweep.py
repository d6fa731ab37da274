import sys
sys.path.insert(0,'tools')
from oom_race import simulate, killed
from reclaimlab import load
s = load(sys.argv[1], sys.argv[3:])
for slow in [float(x) for x in sys.argv[2].split(',')]:
    out=[]
    for ph in range(0, 2000, 100):
        r = simulate(s, slow, ph*1_000_000)
        out.append(f"{ph/1000:g}:{killed(r).replace('w/access @ ','K').replace('completed','ok')}")
    print(slow, ' '.join(out), flush=True)
