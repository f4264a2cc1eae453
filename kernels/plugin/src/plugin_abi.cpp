// The C++ side of the plugin ABI (plugin_abi.hpp). Hand-written: the ABI is ours.
#include "attest/kernels/plugin_abi.hpp"

#include <algorithm>
#include <cstring>

namespace attest::kernels::plugin_abi {

std::string first_line(const char* buf, std::size_t size) {
  std::string s(buf, strnlen(buf, size));
  s = s.substr(0, s.find_first_of("\r\n"));
  return s.empty() ? "(no message)" : s;
}

attest_plugin_tensor c_tensor(const Tensor& t, const char* what) {
  if (t.rank() > ATTEST_PLUGIN_MAX_RANK)
    throw Error(std::string(what) + ": rank " + std::to_string(t.rank()) + " exceeds the plugin ABI's " +
                std::to_string(ATTEST_PLUGIN_MAX_RANK));
  attest_plugin_tensor c{};
  c.struct_size = sizeof c;
  c.dtype = static_cast<std::uint32_t>(t.dtype());
  c.rank = t.rank();
  c.data = t.raw();
  for (int d = 0; d < t.rank(); ++d) {
    c.shape[d] = t.shape()[static_cast<std::size_t>(d)];
    c.strides[d] = t.strides()[static_cast<std::size_t>(d)];
  }
  return c;
}

ProblemC::ProblemC(const Problem& p) : text(to_string(p)) {
  c.struct_size = sizeof c;
  c.mask = static_cast<std::uint32_t>(p.mask);
  c.layout = static_cast<std::uint32_t>(p.layout);
  c.dtype = static_cast<std::uint32_t>(p.dtype);
  c.batch = p.batch;
  c.heads_q = p.heads_q;
  c.heads_kv = p.heads_kv;
  c.seqlen_q = p.seqlen_q;
  c.seqlen_kv = p.seqlen_kv;
  c.head_dim = p.head_dim;
  c.head_dim_v = p.head_dim_v;
  c.pad = p.pad;
  c.softmax_scale = p.scale();
  if (p.ragged()) {
    c.cu_seqlens_q = p.cu_seqlens_q.data();
    c.cu_seqlens_kv = p.cu_seqlens_kv.data();
  }
  c.text = text.c_str();
}

Capabilities capabilities(std::span<const std::int64_t> head_dims, std::uint32_t masks, std::uint32_t layouts,
                          std::uint32_t flags, std::uint32_t declares, std::uint32_t row_align, const char* accepts) {
  Capabilities c;
  c.head_dims.assign(head_dims.begin(), head_dims.end());
  c.masks.clear();
  for (Mask m : {Mask::none, Mask::causal_tl, Mask::causal_br})
    if ((masks >> static_cast<int>(m) & 1u) != 0) c.masks.push_back(m);
  c.layouts.clear();
  for (Layout l : {Layout::bshd, Layout::bhsd, Layout::packed_qkv, Layout::strided})
    if ((layouts >> static_cast<int>(l) & 1u) != 0) c.layouts.push_back(l);
  const auto has = [&](std::uint32_t bit) { return (flags & bit) != 0; };
  c.gqa = has(ATTEST_PLUGIN_CAP_GQA);
  c.cross = has(ATTEST_PLUGIN_CAP_CROSS);
  c.ragged = has(ATTEST_PLUGIN_CAP_RAGGED);
  c.head_dim_v = has(ATTEST_PLUGIN_CAP_HEAD_DIM_V);
  c.lse = has(ATTEST_PLUGIN_CAP_LSE);
  c.graph_capturable = has(ATTEST_PLUGIN_CAP_GRAPH_CAPTURABLE);
  c.deterministic = has(ATTEST_PLUGIN_CAP_DETERMINISTIC);
  c.bitwise = has(ATTEST_PLUGIN_CAP_BITWISE);
  c.ftz = (declares & ATTEST_PLUGIN_DECLARE_FTZ) != 0;
  c.causal_cross = (declares & ATTEST_PLUGIN_DECLARE_NO_CAUSAL_CROSS) == 0;
  c.supports_declares = (declares & ATTEST_PLUGIN_DECLARE_SUPPORTS_LIMITS) != 0;
  c.row_align = row_align > 1 ? row_align : 1;
  if (accepts != nullptr) {  // "check=why" lines
    std::string_view s(accepts);
    while (!s.empty()) {
      const auto nl = s.find('\n');
      const std::string_view line = s.substr(0, nl);
      s = nl == std::string_view::npos ? std::string_view{} : s.substr(nl + 1);
      const auto eq = line.find('=');
      if (eq == std::string_view::npos || eq == 0 || eq + 1 == line.size())
        throw Error("accepts line '" + std::string(line) + "' is not check=why");
      validate_accept_key(line.substr(0, eq));
      c.accepted.emplace_back(std::string(line.substr(0, eq)), std::string(line.substr(eq + 1)));
    }
  }
  return c;
}

attest_plugin_kernel copy_kernel(const attest_plugin_kernel& k) {
  attest_plugin_kernel c{};
  std::memcpy(&c, &k, std::min<std::size_t>(k.struct_size, sizeof c));
  c.struct_size = sizeof c;
  return c;
}

void throw_run_failure(int rc, const std::string& message, const std::string& failure) {
  if (rc == ATTEST_PLUGIN_RUN_REFUSED) throw KernelRefused(message);
  if (rc == ATTEST_PLUGIN_RUN_FAULT) throw KernelFault(message);
  throw Error(failure + message);
}

Status supports(attest_plugin_supports_fn fn, void* context, std::uint32_t dtypes, const Problem& p, const Recipe& r) {
  if (dtypes != 0 && (dtypes >> static_cast<int>(p.dtype) & 1u) == 0)
    return Status::unsupported("problem dtype " + std::string(dtype_name(p.dtype)) + " not supported");
  if (fn != nullptr) {
    const ProblemC pc(p);
    const std::string recipe = to_string(r);
    char reason[kMessageBytes] = {};
    if (fn(context, &pc.c, recipe.c_str(), reason, sizeof reason) != 1)
      return Status::unsupported(first_line(reason, sizeof reason));
  }
  return Status::ok();
}

RunArgsC::RunArgsC(const Args& a)
    : problem(a.problem), recipe(to_string(a.recipe)), label(recipe_label(a.recipe)), config(a.config),
      q(c_tensor(a.q, "q")), k(c_tensor(a.k, "k")), v(c_tensor(a.v, "v")), out(c_tensor(a.out, "out")) {
  if (a.lse != nullptr) lse = c_tensor(*a.lse, "lse");
  ra.struct_size = sizeof ra;
  ra.problem = &problem.c;
  ra.recipe = recipe.c_str();
  ra.recipe_label = label.c_str();
  ra.config = config.c_str();
  ra.q = &q;
  ra.k = &k;
  ra.v = &v;
  ra.out = &out;
  ra.lse = a.lse != nullptr ? &lse : nullptr;
}

int call(attest_plugin_run_fn run, void* context, std::uint32_t flags, std::mutex& serial,
         const attest_plugin_run_args& ra, std::string& message) {
  char buf[kMessageBytes] = {};
  int rc = 0;
  if ((flags & ATTEST_PLUGIN_CAP_THREAD_SAFE) != 0) {
    rc = run(context, &ra, buf, sizeof buf);
  } else {
    const std::lock_guard<std::mutex> lock(serial);
    rc = run(context, &ra, buf, sizeof buf);
  }
  if (rc != 0) message = first_line(buf, sizeof buf);
  return rc;
}

}  // namespace attest::kernels::plugin_abi
