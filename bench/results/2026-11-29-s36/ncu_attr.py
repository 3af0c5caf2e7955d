import re,csv,gzip,collections,sys
cur=None; loc=[]
for l in open(sys.argv[1]):
    m=re.search(r'//## File "([^"]+)", line (\d+)',l)
    if m: cur=(m.group(1).split('/')[-1],int(m.group(2))); continue
    m=re.match(r'\s+/\*([0-9a-f]+)\*/\s+(.*?);',l)
    if m: loc.append((int(m.group(1),16),m.group(2).strip(),cur))
rows=list(csv.reader(gzip.open(sys.argv[2],'rt')))
hdr=rows[1]; data=rows[2:]; idx={h:i for i,h in enumerate(hdr)}
stalls=[h for h in hdr if h.startswith('stall_') and 'Not Issued' not in h]
tot=collections.Counter(); by=collections.defaultdict(collections.Counter)
for k,r in enumerate(data):
    f,ln=loc[k][2] if loc[k][2] else ('?',0)
    key=(f,ln)
    for s in stalls:
        v=int(r[idx[s]] or 0)
        if v: by[key][s]+=v; tot[s]+=v
    by[key]['samples']+=int(r[idx['# Samples']] or 0)
    by[key]['exec']+=int(r[idx['Instructions Executed']] or 0)
T=sum(tot.values())
print('total samples',T); print([(s,round(100*v/T,1)) for s,v in tot.most_common(12)])
# by moe.cu line ranges
def rng(lo,hi,f='moe.cu'):
    c=collections.Counter()
    for (ff,ln),cc in by.items():
        if ff==f and lo<=ln<=hi: c.update(cc)
    return c
import json
for name,lo,hi in json.loads(sys.argv[3]):
    c=rng(lo,hi); S=sum(v for k,v in c.items() if k.startswith('stall_'))
    print('%-28s samples %7d exec %8d  '%(name,S,c['exec'])+' '.join('%s %.0f%%'%(k[6:],100*v/S) for k,v in c.most_common(8) if k.startswith('stall_') and S))
