#include "gpu/runtime.h"

#include "common/log.h"
#include "cuda/nvrtc.h"
#include "gpu/reduce_kernels.h"

namespace conduit::gpu {

Runtime& Runtime::Get() {
  static Runtime* runtime = new Runtime;  // never destroyed: mappings may outlive main()
  return *runtime;
}

Runtime::Runtime() {
  Probe();
  const cuda::CudaDriver* driver = driver_;
  memory_ = std::make_unique<IpcMemoryCache>(
      [this](const shimproto::RegisterBufferRequest& req, int device, DeviceMapping* out) -> Status {
        if (!available_) return InvalidUsage("this daemon has no GPU support: %s", reason_.c_str());
        cuda::ScopedContext ctx(*driver_, context(device));
        cuda::IpcMemHandle handle;
        memcpy(handle.reserved, req.ipc_handle, sizeof(handle.reserved));
        cuda::CUdeviceptr base = 0;
        cuda::CUresult r = driver_->IpcOpenMemHandle(&base, handle, cuda::kIpcMemLazyEnablePeerAccess);
        if (r != cuda::kSuccess) return driver_->Error("cuIpcOpenMemHandle of a program's buffer", r);
        out->base = base;
        return Status::Ok();
      },
      [this, driver](const DeviceMapping& m) {
        if (driver == nullptr) return;
        cuda::ScopedContext ctx(*driver, context(m.device));
        cuda::CUresult r = driver->IpcCloseMemHandle(m.base);
        if (r != cuda::kSuccess) CLOG_WARN("%s", driver->Error("cuIpcCloseMemHandle", r).message().c_str());
      });
  if (available_) {
    CLOG_INFO("GPU support on: %d device(s), CUDA driver %d", device_count(), driver_->version());
  } else {
    CLOG_INFO("GPU support off (device buffers are staged by the programs): %s", reason_.c_str());
  }
}

void Runtime::Probe() {
  std::string why;
  driver_ = cuda::CudaDriver::Load(&why);
  if (driver_ == nullptr) {
    reason_ = why;
    return;
  }
  int count = 0;
  cuda::CUresult r = driver_->DeviceGetCount(&count);
  if (r != cuda::kSuccess || count == 0) {
    reason_ = r != cuda::kSuccess ? driver_->Error("cuDeviceGetCount", r).message() : "the CUDA driver sees no GPU";
    return;
  }
  for (int i = 0; i < count; ++i) {
    Device d;
    int major = 0, minor = 0;
    if ((r = driver_->DeviceGet(&d.handle, i)) != cuda::kSuccess ||
        (r = driver_->DeviceGetUuid(&d.uuid, d.handle)) != cuda::kSuccess ||
        (r = driver_->DeviceGetAttribute(&major, cuda::kDeviceAttributeComputeCapabilityMajor, d.handle)) != cuda::kSuccess ||
        (r = driver_->DeviceGetAttribute(&minor, cuda::kDeviceAttributeComputeCapabilityMinor, d.handle)) != cuda::kSuccess ||
        (r = driver_->DeviceGetAttribute(&d.multiprocessors, cuda::kDeviceAttributeMultiprocessorCount, d.handle)) !=
            cuda::kSuccess ||
        (r = driver_->DevicePrimaryCtxRetain(&d.context, d.handle)) != cuda::kSuccess) {
      reason_ = driver_->Error(("probing GPU " + std::to_string(i)).c_str(), r).message();
      return;
    }
    d.cc = major * 10 + minor;
    devices_.push_back(std::move(d));
  }
  const cuda::Nvrtc* nvrtc = cuda::Nvrtc::Load(&why);
  if (nvrtc == nullptr) {
    reason_ = why + " (the combine kernels are compiled at run time)";
    return;
  }
  // Compiled once per architecture now, so no collective waits for the compiler.
  for (const Device& d : devices_) {
    if (ptx_by_cc_.count(d.cc)) continue;
    std::string ptx;
    Status st = CompileCombineKernels(*nvrtc, d.cc, &ptx);
    if (!st.ok()) {
      reason_ = st.message();
      return;
    }
    ptx_by_cc_[d.cc] = std::move(ptx);
  }
  available_ = true;
}

int Runtime::DeviceOfUuid(const uint8_t uuid[16]) const {
  for (size_t i = 0; i < devices_.size(); ++i) {
    if (memcmp(devices_[i].uuid.bytes, uuid, sizeof(devices_[i].uuid.bytes)) == 0) return static_cast<int>(i);
  }
  return -1;
}

Status Runtime::Kernel(int device, ncclDataType_t type, ncclRedOp_t op, cuda::CUfunction* fn) {
  if (!available_) return InvalidUsage("this daemon has no GPU support: %s", reason_.c_str());
  if (device < 0 || device >= device_count()) return InternalError("no GPU %d", device);
  std::lock_guard<std::mutex> lock(mu_);
  Device& d = devices_[device];
  cuda::ScopedContext ctx(*driver_, d.context);
  if (d.module == nullptr) {
    cuda::CUresult r = driver_->ModuleLoadData(&d.module, ptx_by_cc_[d.cc].c_str());
    if (r != cuda::kSuccess) return driver_->Error("loading the combine kernels (cuModuleLoadData)", r);
  }
  const std::string name = CombineKernelName(type, op);
  auto it = d.kernels.find(name);
  if (it == d.kernels.end()) {
    cuda::CUfunction f = nullptr;
    cuda::CUresult r = driver_->ModuleGetFunction(&f, d.module, name.c_str());
    if (r != cuda::kSuccess) return driver_->Error(("cuModuleGetFunction(" + name + ")").c_str(), r);
    it = d.kernels.emplace(name, f).first;
  }
  *fn = it->second;
  return Status::Ok();
}

bool Runtime::EnablePeerAccess(int device, int peer) {
  if (device == peer) return true;
  std::lock_guard<std::mutex> lock(mu_);
  auto key = std::make_pair(device, peer);
  auto it = peer_.find(key);
  if (it != peer_.end()) return it->second;
  int can = 0;
  bool ok = driver_->DeviceCanAccessPeer(&can, devices_[device].handle, devices_[peer].handle) == cuda::kSuccess && can;
  if (ok) {
    cuda::ScopedContext ctx(*driver_, devices_[device].context);
    cuda::CUresult r = driver_->CtxEnablePeerAccess(devices_[peer].context, 0);
    ok = r == cuda::kSuccess || r == cuda::kErrorPeerAccessAlreadyEnabled;
  }
  peer_[key] = ok;
  return ok;
}

}  // namespace conduit::gpu
