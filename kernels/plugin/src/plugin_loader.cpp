// The plugin loader: dlopen, validation of the C description, and the adapter that makes each
// plugin kernel a registry Kernel. Hand-written because the ABI is ours; dlopen/dlsym are the
// platform's loader (POSIX), there is nothing to reuse.
#include "attest/kernels/plugin_loader.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

#include "attest/kernels/kernel.hpp"
#include "attest/kernels/plugin_abi.hpp"
#include "attest/plugin.h"
#if ATTEST_KERNELS_PLUGIN_GPU
#include "attest/kernels/gpu/device.hpp"
#include "attest/kernels/gpu/host_mirror.hpp"
#endif

namespace attest::kernels {
namespace {

// The C enums carry the C++ enums' values, so conversions are casts.
static_assert(ATTEST_PLUGIN_DTYPE_F64 == static_cast<int>(DType::f64) && ATTEST_PLUGIN_DTYPE_F32 == static_cast<int>(DType::f32) &&
              ATTEST_PLUGIN_DTYPE_F16 == static_cast<int>(DType::f16) && ATTEST_PLUGIN_DTYPE_BF16 == static_cast<int>(DType::bf16) &&
              ATTEST_PLUGIN_DTYPE_FP8_E4M3FN == static_cast<int>(DType::fp8_e4m3fn) &&
              ATTEST_PLUGIN_DTYPE_FP8_E5M2 == static_cast<int>(DType::fp8_e5m2) && ATTEST_PLUGIN_DTYPE_I8 == static_cast<int>(DType::i8) &&
              ATTEST_PLUGIN_DTYPE_U8 == static_cast<int>(DType::u8) && ATTEST_PLUGIN_DTYPE_I16 == static_cast<int>(DType::i16) &&
              ATTEST_PLUGIN_DTYPE_U16 == static_cast<int>(DType::u16) && ATTEST_PLUGIN_DTYPE_I32 == static_cast<int>(DType::i32) &&
              ATTEST_PLUGIN_DTYPE_I64 == static_cast<int>(DType::i64) && ATTEST_PLUGIN_DTYPE_B8 == static_cast<int>(DType::b8));
static_assert(ATTEST_PLUGIN_MASK_NONE == static_cast<int>(Mask::none) && ATTEST_PLUGIN_MASK_CAUSAL_TL == static_cast<int>(Mask::causal_tl) &&
              ATTEST_PLUGIN_MASK_CAUSAL_BR == static_cast<int>(Mask::causal_br));
static_assert(ATTEST_PLUGIN_LAYOUT_BSHD == static_cast<int>(Layout::bshd) && ATTEST_PLUGIN_LAYOUT_BHSD == static_cast<int>(Layout::bhsd) &&
              ATTEST_PLUGIN_LAYOUT_PACKED_QKV == static_cast<int>(Layout::packed_qkv) &&
              ATTEST_PLUGIN_LAYOUT_STRIDED == static_cast<int>(Layout::strided));
constexpr std::uint32_t kDtypeBits = (1u << (ATTEST_PLUGIN_DTYPE_B8 + 1)) - 1;
constexpr std::uint32_t kMaskBits = (1u << (ATTEST_PLUGIN_MASK_CAUSAL_BR + 1)) - 1;
constexpr std::uint32_t kLayoutBits = (1u << (ATTEST_PLUGIN_LAYOUT_STRIDED + 1)) - 1;

bool valid_name(const char* s, bool allow_dot) {
  if (s == nullptr || *s == '\0') return false;
  for (; *s != '\0'; ++s) {
    const char c = *s;
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
                    (allow_dot && c == '.');
    if (!ok) return false;
  }
  return true;
}

// One loaded library: its handle (never closed: registry entries point into its code) and the
// lock that serialises kernels that do not declare ATTEST_PLUGIN_CAP_THREAD_SAFE.
struct Library {
  std::string file;  // as given, for messages
  std::string name;
  std::mutex serial;
};

class PluginKernel final : public Kernel {
 public:
  PluginKernel(std::shared_ptr<Library> lib, const attest_plugin_kernel& k, std::vector<std::string> recipes)
      : lib_(std::move(lib)), k_(plugin_abi::copy_kernel(k)), name_("plugin." + lib_->name + "." + k.name), backend_(k.backend),
        recipes_(std::move(recipes)) {
    configs_.emplace_back();
    for (std::uint32_t i = 0; i < k.n_configs; ++i)
      if (*k.configs[i] != '\0') configs_.emplace_back(k.configs[i]);
  }

  std::string name() const override { return name_; }
  std::string backend() const override { return "plugin:" + backend_; }
  std::vector<std::string> recipes() const override { return recipes_; }
  std::vector<std::string> configs() const override { return configs_; }
  Capabilities capabilities() const override {
    return plugin_abi::capabilities({k_.head_dims, k_.n_head_dims}, k_.masks, k_.layouts, k_.flags, k_.declares,
                                    k_.row_align, k_.accepts);
  }

  Status supports(const Problem& p, const Recipe& r) const override {
    if (auto st = Kernel::supports(p, r); !st) return st;
    // The dtype bits first, then the device, then the kernel's own callback.
    if (auto st = plugin_abi::supports(nullptr, nullptr, k_.dtypes, p, r); !st) return st;
    if (k_.memory == ATTEST_PLUGIN_MEMORY_DEVICE) {
#if ATTEST_KERNELS_PLUGIN_GPU
      if (gpu::device_count() == 0) return Status::unsupported("no GPU device (or no driver) on this host");
#else
      return Status::unsupported("device-memory plugin kernel, and this attest build has no GPU backend");
#endif
    }
    return plugin_abi::supports(k_.supports, k_.context, 0 /* dtypes checked above */, p, r);
  }

  void run(const Args& a) override {
    if (auto st = supports(a.problem, a.recipe); !st) throw Error(name_ + ": " + st.reason());
    plugin_abi::RunArgsC c(a);
    if (k_.memory == ATTEST_PLUGIN_MEMORY_DEVICE) {
      run_device(a, c);
    } else {
      call(c.ra);
    }
  }

 private:
  void call(const attest_plugin_run_args& ra) {
    std::string message;
    if (const int rc = plugin_abi::call(k_.run, k_.context, k_.flags, lib_->serial, ra, message); rc != 0)
      plugin_abi::throw_run_failure(
          rc, message, "plugin kernel " + name_ + " (" + lib_->file + ") reported failure " + std::to_string(rc) + ": ");
  }

#if ATTEST_KERNELS_PLUGIN_GPU
  // Device kernels get device copies of every buffer (one per distinct host buffer, so views of
  // one allocation stay views, and guard zones around out/lse travel with it), run on the default
  // stream, and the written buffers come back whole.
  void run_device(const Args& a, plugin_abi::RunArgsC& c) {
    gpu::HostMirror mirror;
    c.q.data = mirror.address(a.q);
    c.k.data = mirror.address(a.k);
    c.v.data = mirror.address(a.v);
    c.out.data = mirror.address(a.out);
    if (a.lse != nullptr) c.lse.data = mirror.address(*a.lse);
    std::tie(c.problem.c.cu_seqlens_q_device, c.problem.c.cu_seqlens_kv_device) = mirror.cu_seqlens(a.problem);
    c.ra.stream = nullptr;
    call(c.ra);
    gpu::synchronize();
    mirror.download(a.out);
    if (a.lse != nullptr) mirror.download(*a.lse);
  }
#else
  void run_device(const Args&, plugin_abi::RunArgsC&) {
    throw Error(name_ + ": device-memory plugin kernel, and this attest build has no GPU backend");
  }
#endif

  std::shared_ptr<Library> lib_;
  attest_plugin_kernel k_;  // copy_kernel: the fields the plugin's struct_size covers, the rest 0
  std::string name_, backend_;
  std::vector<std::string> recipes_, configs_;
};

// Validates one kernel description; returns its recipe labels. `where` names plugin and kernel.
std::vector<std::string> validate_kernel(const attest_plugin_kernel& k, const std::string& where) {
  auto fail = [&](const std::string& what) { throw Error(where + ": " + what); };
  if (k.backend == nullptr || *k.backend == '\0') fail("backend is empty");
  if (k.memory != ATTEST_PLUGIN_MEMORY_HOST && k.memory != ATTEST_PLUGIN_MEMORY_DEVICE)
    fail("memory " + std::to_string(k.memory) + " is neither HOST (0) nor DEVICE (1)");
  if (k.run == nullptr) fail("run is NULL");
  if (k.n_recipes == 0 || k.recipes == nullptr) fail("lists no recipe");
  if (k.n_configs != 0 && k.configs == nullptr) fail("n_configs is " + std::to_string(k.n_configs) + " but configs is NULL");
  for (std::uint32_t i = 0; i < k.n_configs; ++i)
    if (k.configs[i] == nullptr) fail("configs[" + std::to_string(i) + "] is NULL");
  if (k.n_head_dims != 0 && k.head_dims == nullptr) fail("n_head_dims is " + std::to_string(k.n_head_dims) + " but head_dims is NULL");
  for (std::uint32_t i = 0; i < k.n_head_dims; ++i)
    if (k.head_dims[i] < 1) fail("head_dims[" + std::to_string(i) + "] = " + std::to_string(k.head_dims[i]) + " is not >= 1");
  if (k.masks == 0 || (k.masks & ~kMaskBits) != 0) fail("masks bits " + std::to_string(k.masks) + " are empty or unknown");
  if (k.layouts == 0 || (k.layouts & ~kLayoutBits) != 0) fail("layouts bits " + std::to_string(k.layouts) + " are empty or unknown");
  if ((k.dtypes & ~kDtypeBits) != 0) fail("dtypes bits " + std::to_string(k.dtypes) + " name unknown dtypes");
  if ((k.flags & ~ATTEST_PLUGIN_CAP_ALL) != 0) fail("flags " + std::to_string(k.flags) + " hold unknown ATTEST_PLUGIN_CAP bits");
  if ((k.declares & ~ATTEST_PLUGIN_DECLARE_ALL) != 0)
    fail("declares " + std::to_string(k.declares) + " holds unknown ATTEST_PLUGIN_DECLARE bits");
  std::vector<std::string> labels;
  for (std::uint32_t i = 0; i < k.n_recipes; ++i) {
    if (k.recipes[i] == nullptr) fail("recipes[" + std::to_string(i) + "] is NULL");
    try {
      labels.push_back(recipe_label(parse_recipe(k.recipes[i])));
    } catch (const Error& e) {
      fail("recipes[" + std::to_string(i) + "]: " + e.what());
    }
  }
  return labels;
}

struct State {
  std::mutex lock;
  std::map<std::filesystem::path, LoadedPlugin> loaded;  // by canonical path
};
State& state() {
  static State s;
  return s;
}

}  // namespace

LoadedPlugin load_plugin(const std::filesystem::path& path) {
  const std::string file = path.string();
  const std::string where = "plugin '" + file + "'";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw Error(where + ": no such file");
  const auto canonical = std::filesystem::canonical(path, ec);
  if (ec) throw Error(where + ": " + ec.message());
  auto& st = state();
  const std::lock_guard<std::mutex> guard(st.lock);
  if (auto it = st.loaded.find(canonical); it != st.loaded.end()) return it->second;

  // RTLD_LOCAL: two plugins may define the same symbols; RTLD_NOW: an unresolved symbol is an
  // error here, not a crash in the middle of a gate run.
  void* handle = ::dlopen(canonical.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = ::dlerror();
    throw Error(where + ": cannot load: " + (err != nullptr ? err : "unknown dlopen error"));
  }
  // From here on a refusal closes the library again: nothing of it stays registered or mapped.
  struct Closer {
    void* h;
    ~Closer() {
      if (h != nullptr) ::dlclose(h);
    }
  } closer{handle};
  ::dlerror();
  void* sym = ::dlsym(handle, ATTEST_PLUGIN_QUERY_SYMBOL);
  if (sym == nullptr)
    throw Error(where + ": no symbol " ATTEST_PLUGIN_QUERY_SYMBOL " (not an attest plugin, or the function is not exported "
                "with ATTEST_PLUGIN_EXPORT and C linkage)");
  attest_plugin_query_fn query = nullptr;
  static_assert(sizeof query == sizeof sym);
  std::memcpy(&query, &sym, sizeof query);  // POSIX guarantees object and function pointers convert
  const attest_plugin_info* info = query(ATTEST_PLUGIN_ABI_VERSION);
  if (info == nullptr)
    throw Error(where + ": " ATTEST_PLUGIN_QUERY_SYMBOL "(" + std::to_string(ATTEST_PLUGIN_ABI_VERSION) +
                ") returned NULL (the plugin refuses this ABI version)");
  // struct_size and abi_version are the first two fields in every version.
  if (info->abi_version != ATTEST_PLUGIN_ABI_VERSION)
    throw Error(where + ": built for attest plugin ABI version " + std::to_string(info->abi_version) +
                ", this attest speaks version " + std::to_string(ATTEST_PLUGIN_ABI_VERSION));
  if (info->struct_size < sizeof(attest_plugin_info))
    throw Error(where + ": attest_plugin_info.struct_size is " + std::to_string(info->struct_size) + " bytes, ABI version " +
                std::to_string(ATTEST_PLUGIN_ABI_VERSION) + " needs at least " + std::to_string(sizeof(attest_plugin_info)) +
                " (built against another attest/plugin.h?)");
  if (!valid_name(info->name, false)) throw Error(where + ": plugin name is empty or not [A-Za-z0-9_-]+");
  if (info->n_kernels == 0 || info->kernels == nullptr) throw Error(where + " (" + info->name + "): lists no kernels");

  auto lib = std::make_shared<Library>();
  lib->file = file;
  lib->name = info->name;
  LoadedPlugin out;
  out.path = path;
  out.name = info->name;
  out.version = info->version != nullptr ? info->version : "";
  std::vector<std::unique_ptr<Kernel>> made;
  for (std::uint32_t i = 0; i < info->n_kernels; ++i) {
    const attest_plugin_kernel* k = info->kernels[i];
    const std::string kw = where + " kernel " + std::to_string(i);
    if (k == nullptr) throw Error(kw + ": NULL");
    // Fields appended after the first version-1 release (declares, row_align) are read only
    // when struct_size covers them: a plugin built against the older header keeps loading.
    if (k->struct_size < ATTEST_PLUGIN_KERNEL_V1_MIN_SIZE)
      throw Error(kw + ": attest_plugin_kernel.struct_size is " + std::to_string(k->struct_size) + " bytes, ABI version " +
                  std::to_string(ATTEST_PLUGIN_ABI_VERSION) + " needs at least " +
                  std::to_string(ATTEST_PLUGIN_KERNEL_V1_MIN_SIZE) + " (built against another attest/plugin.h?)");
    if (!valid_name(k->name, true)) throw Error(kw + ": name is empty or not [A-Za-z0-9_.-]+");
    const std::string full = "plugin." + lib->name + "." + k->name;
    const attest_plugin_kernel kc = plugin_abi::copy_kernel(*k);
    auto labels = validate_kernel(kc, where + " kernel " + k->name);
    if (Registry::instance().find(full) != nullptr ||
        std::find(out.kernels.begin(), out.kernels.end(), full) != out.kernels.end())
      throw Error(where + ": kernel " + full + " is already registered");
    made.push_back(std::make_unique<PluginKernel>(lib, kc, std::move(labels)));
    out.kernels.push_back(full);
  }
  for (auto& k : made) Registry::instance().add(std::move(k));
  closer.h = nullptr;  // registered: the library stays for the life of the process
  st.loaded.emplace(canonical, out);
  return out;
}

}  // namespace attest::kernels
