# Session 37: per region of moe_kernel (the kernel line a SASS instruction is inlined into, or its innermost moe.cu function: argv[3] = top | inner), the executed 128-byte lines, instructions, and warp-stall samples of an ncu --page source --csv --print-source sass export, mapped through nvdisasm -gi of the same moe.o. Usage: python3 ncu_lines.py k.sass ncu_sass.csv.gz top
import csv,gzip,sys,collections,re
src=open('/work/main/src/device/ops/moe.cu').read().split('\n')
starts=[]
for i,l in enumerate(src,1):
    m=re.match(r'^(?:static |__global__ |extern )?.*?\b([a-z_0-9]+)\(',l)
    if m and not l.startswith((' ','#','/*')) and ('__device__' in l or '__global__' in l or (i>1 and ('__device__' in src[i-2] or '__global__' in src[i-2] or 'template' in src[i-2]))):
        starts.append((i,m.group(1)))
def fn(line):
    name='?'
    for s,n in starts:
        if s<=line: name=n
        else: break
    return name
chain=[];pending=[];insts=[]
for l in open(sys.argv[1]):
    m=re.match(r'\s*//## File "([^"]+)", line (\d+)(?: inlined at "([^"]+)", line (\d+))?',l)
    if m:
        pending.append((m.group(1).split('/')[-1],int(m.group(2)),m.group(3) and m.group(3).split('/')[-1],m.group(4) and int(m.group(4)))); continue
    m=re.match(r'\s+/\*([0-9a-f]+)\*/\s+(.*?);',l)
    if m:
        if pending: chain=pending; pending=[]
        insts.append((int(m.group(1),16),m.group(2),chain))
rows=list(csv.reader(gzip.open(sys.argv[2],'rt')))
hdr=rows[1]; data=rows[2:]; idx={h:i for i,h in enumerate(hdr)}
assert len(data)==len(insts),(len(data),len(insts))
def top(ch):
    o=ch[-1] if ch else ('?',0,None,None)
    return o[1] if o[0]=='moe.cu' else -1
def inner(ch):
    for e in ch:
        if e[0]=='moe.cu': return fn(e[1])
        if e[2]=='moe.cu': return fn(e[3])
    return '?'
mode=sys.argv[3] if len(sys.argv)>3 else 'top'
agg=collections.defaultdict(lambda: collections.Counter())
lines=collections.defaultdict(set)
for k,(a,t,ch) in enumerate(insts):
    r=data[k]; ex=int(r[idx['Instructions Executed']] or 0)
    key=top(ch) if mode=='top' else inner(ch)
    if mode=='top': key='%d %s'%(key, src[key-1].strip()[:60] if key>0 else '?')
    c=agg[key]
    c['exec']+=ex
    if ex>0: c['ins']+=1; lines[key].add(a//128)
    c['samp']+=int(r[idx['stall_no_inst']] or 0)*0
    for s in ('stall_no_inst','stall_barrier','stall_long_sb','stall_wait','stall_membar','stall_lg','stall_short_sb','stall_branch_resolving','stall_selected','stall_not_selected','stall_math','stall_mio','stall_dispatch','stall_sleep','stall_misc','stall_drain','stall_imc','stall_tex'):
        v=int(r[idx[s]] or 0); c[s]+=v; c['S']+=v
alll=set()
for k in lines: alll|=lines[k]
print('executed lines total',len(alll),' instructions executed (static) ',sum(c['ins'] for c in agg.values()))
print('%-70s %6s %6s %9s %7s %6s %6s %6s %6s'%('region','lines','ins','exec','samples','noinst','barr','longsb','wait'))
for key,c in sorted(agg.items(),key=lambda kv:-kv[1]['S']):
    if c['S']<20 and c['ins']<50: continue
    S=max(1,c['S'])
    print('%-70s %6d %6d %9d %7d %5.0f%% %5.0f%% %5.0f%% %5.0f%%'%(key[:70],len(lines[key]),c['ins'],c['exec'],c['S'],100*c['stall_no_inst']/S,100*c['stall_barrier']/S,100*c['stall_long_sb']/S,100*c['stall_wait']/S))
