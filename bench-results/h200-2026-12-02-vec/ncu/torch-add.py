import torch
a=torch.randn(49,32,157696,device='cuda',dtype=torch.half)
c=torch.randn(49,32,157696,device='cuda',dtype=torch.half)
b=torch.randn(1,32,1,device='cuda',dtype=torch.float)
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
o=(a.float()+b+c.float()).half()   # several kernels
o2=a+c
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
print(o.shape, o2.shape)
