// Studies that need more than one call of a kernel per verdict, on top of the gate's Context:
//
// - merge: K/V split into N shards (N = 2, 4, 8 ...), the kernel called on each shard for
//   (out, lse), the partials merged by LSE with conformance/dist's merge_partials (ring attention's
//   arithmetic), compared with the kernel's single call. Budget: the same split and merge done
//   by the recipe emulator; floor: the emulator's K/V-reversed run plus what one float32 ulp of
//   the stored partial LSEs moves the merge. Judged by the split_kv row of the tolerance table.
// - ladder: one problem per sequence length L (B=1, S=T=L, no mask), the kernel on the whole
//   problem, the FP64 reference and the emulator only on a few contiguous blocks of query rows
//   against all keys (a cross-attention S_sub x T problem, so the CPU work grows like L, not L^2).
//   Each length is judged by the accuracy row; over the lengths the log-log slope of the error
//   against L must stay within a margin of the emulator's (budget) and floor's slopes: a kernel
//   whose error grows with the number of KV blocks (a low-precision running sum, a bad rescale)
//   fails there even while every single length is inside its bound.
// - pair: two kernels on the same cases: bitwise equality, or their difference within the
//   accuracy row's bound with the recipe's budget and floor. A case either side refuses (its
//   declarations, or at call time) is unsupported with that side's reason.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "attest/conformance/case.hpp"
#include "attest/conformance/check.hpp"
#include "attest/conformance/verdict.hpp"
#include "attest/core/status.hpp"
#include "attest/datasets/distributions.hpp"
#include "attest/conformance/dist.hpp"
#include "attest/metrics/tensor_metrics.hpp"
#include "attest/reference/attention.hpp"
#include "attest/reference/emulate.hpp"
#include "attest_py_internal.hpp"

namespace attest::py {

using nlohmann::json;
using conformance::Outcome;
using conformance::Result;
using conformance::Verdict;

Tensor to_f64(const Tensor& t) {
  Tensor out(DType::f64, t.shape());
  const Tensor c = t.contiguous();
  const float* s = c.data<float>();
  double* d = out.data<double>();
  for (std::int64_t i = 0; i < c.numel(); ++i) d[i] = s[i];
  return out;
}

conformance::MetricSet plus(conformance::MetricSet a, const conformance::MetricSet& b) {
  for (auto& [k, v] : a)
    if (auto it = b.find(k); it != b.end()) v += it->second;
  return a;
}

json comparison_json(const metrics::Comparison& c) {
  json j;
  metrics::to_json(j, c);
  return j;
}

conformance::Case case_from(const json& req, const std::string& kernel_key) {
  conformance::Case c;
  c.kernel = req.at(kernel_key).get<std::string>();
  c.recipe = parse_recipe(req.at("recipe").get<std::string>());
  c.problem = parse_problem(req.at("problem").get<std::string>());
  c.dist = datasets::parse_distribution(req.value("dist", std::string("normal")));
  c.seed = req.value("seed", std::uint64_t{1});
  return c;
}

namespace {



double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// ---- merge ----

conformance::dist::Partial partial(const Tensor& out, const Tensor& lse) { return {to_f64(out), to_f64(lse)}; }

Outcome merge_one(conformance::Context& ctx, std::int64_t shards) {
  const Problem& p = ctx.problem();
  if (!ctx.caps().lse) return {Verdict::unsupported, "kernel returns no LSE: merge conformance needs (out, lse)", json::object()};
  if (p.mask != Mask::none) return {Verdict::unsupported, "merge conformance is checked on unmasked problems", json::object()};
  if (p.ragged()) return {Verdict::unsupported, "merge conformance is checked on non-ragged problems", json::object()};
  if (p.seqlen_kv < shards) return {Verdict::unsupported, "fewer keys than shards", json::object()};
  if (auto st = ctx.support(); !st) return {Verdict::unsupported, st.reason(), json::object()};
  const auto bounds = conformance::dist::even_split(p.seqlen_kv, shards);
  const auto& in = ctx.inputs();
  std::vector<conformance::dist::Partial> kp, ep, sp;
  for (std::size_t i = 0; i + 1 < bounds.size(); ++i) {
    Problem ps = p;
    ps.seqlen_kv = bounds[i + 1] - bounds[i];
    if (auto st = ctx.kernel().supports(ps, ctx.recipe()); !st)
      return {Verdict::unsupported, "shard problem refused: " + st.reason(), json::object()};
    const datasets::Qkv shard{in.q, conformance::token_slice(in.k, bounds[i], bounds[i + 1]),
                              conformance::token_slice(in.v, bounds[i], bounds[i + 1])};
    const auto r = ctx.run(ps, shard);
    if (r.lse.empty()) return {Verdict::error, "kernel returned no LSE for a shard", json::object()};
    kp.push_back(partial(r.out, r.lse));
    // One ulp of each stored LSE, alternately up and down: what the merge weights alone move.
    sp.push_back(partial(r.out, conformance::bump_ulp(r.lse, i % 2 == 0 ? INFINITY : -INFINITY)));
    const auto e = ctx.emulate(ps, shard.q, shard.k, shard.v);
    ep.push_back(partial(e.out, e.lse));
  }
  const auto km = conformance::dist::merge_partials(kp);
  const auto em = conformance::dist::merge_partials(ep);
  const auto sm = conformance::dist::merge_partials(sp);
  const auto& full = ctx.baseline();
  const auto& emu = ctx.emu();
  const auto& rev = ctx.emu_rev();
  const auto m_out = metrics::compare(km.out, full.out), m_lse = metrics::compare(km.lse, full.lse);
  const auto b_out = metrics::compare(em.out, emu.out), b_lse = metrics::compare(em.lse, emu.lse);
  const auto f_out = metrics::compare(rev.out, emu.out), f_lse = metrics::compare(rev.lse, emu.lse);
  const auto s_out = metrics::compare(sm.out, km.out), s_lse = metrics::compare(sm.lse, km.lse);
  json fig{{"shards", shards}, {"bounds", bounds}, {"out", comparison_json(m_out)}, {"lse", comparison_json(m_lse)},
           {"emulator_out", comparison_json(b_out)}, {"lse_ulp_sensitivity", comparison_json(s_out)}};
  if (m_out.nonfinite_mismatches > 0 || m_lse.nonfinite_mismatches > 0)
    return {Verdict::mistrusted, "merged shards have NaN/Inf where the single call has none", fig};
  if (m_out.norm_ref == 0) return {Verdict::mistrusted, "single-call output has norm 0: the merge detects nothing", fig};
  const auto& row = ctx.tolerances().lookup(ctx.recipe_label(), "split_kv");
  const auto jd = conformance::judge(row, conformance::metric_set(m_out, &m_lse), conformance::metric_set(b_out, &b_lse),
                                     plus(conformance::metric_set(f_out, &f_lse), conformance::metric_set(s_out, &s_lse)));
  fig["judgement"] = jd.figures;
  if (!jd.pass) return {Verdict::failed, fmt::format("{} shards merged by LSE vs single call: {}", shards, jd.reason), fig};
  return {Verdict::passed, "", fig};
}

// ---- ladder ----

struct Fit {
  double slope = NAN, intercept = NAN;
};
Fit loglog_fit(const std::vector<double>& x, const std::vector<double>& y) {
  std::vector<double> lx, ly;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (x[i] > 0 && y[i] > 0 && std::isfinite(y[i])) {
      lx.push_back(std::log(x[i]));
      ly.push_back(std::log(y[i]));
    }
  Fit f;
  const auto n = static_cast<double>(lx.size());
  if (lx.size() < 2) return f;
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (std::size_t i = 0; i < lx.size(); ++i) {
    sx += lx[i];
    sy += ly[i];
    sxx += lx[i] * lx[i];
    sxy += lx[i] * ly[i];
  }
  const double den = n * sxx - sx * sx;
  if (den == 0) return f;
  f.slope = (n * sxy - sx * sy) / den;
  f.intercept = (sy - f.slope * sx) / n;
  return f;
}

}  // namespace

json ladder_slope(const std::vector<double>& xs, const std::vector<double>& ek, const std::vector<double>& eb,
                  const std::vector<double>& ef, double margin, bool any_fail, std::string& verdict, std::string& reason) {
  const Fit fk = loglog_fit(xs, ek), fb = loglog_fit(xs, eb), ff = loglog_fit(xs, ef);
  // The threshold follows the emulator: a recipe whose own error grows with L (a per-tensor
  // scale over more tokens) lets the kernel grow as much; the margin absorbs the scatter of a
  // fit over a handful of lengths. Larger slopes are the signature of error that accumulates
  // per KV block.
  const double ref_slope = std::max(std::isfinite(fb.slope) ? fb.slope : 0.0, std::isfinite(ff.slope) ? ff.slope : 0.0);
  const double threshold = ref_slope + margin;
  json slope{{"kernel", std::isfinite(fk.slope) ? json(fk.slope) : json("nan")},
             {"budget", std::isfinite(fb.slope) ? json(fb.slope) : json("nan")},
             {"floor", std::isfinite(ff.slope) ? json(ff.slope) : json("nan")},
             {"margin", margin},
             {"threshold", threshold},
             {"lengths_fitted", xs.size()}};
  verdict = "passed";
  reason.clear();
  if (xs.size() < 3) {
    verdict = "unsupported";
    reason = fmt::format("only {} lengths measured: no slope", xs.size());
  } else if (!std::isfinite(fk.slope) || fk.slope > threshold) {
    verdict = "failed";
    reason = fmt::format("error grows with length: log-log slope {:.3f} > {:.3f} (emulator/floor slope {:.3f} + margin {})",
                         fk.slope, threshold, ref_slope, margin);
  } else if (any_fail) {
    verdict = "failed";
    reason = "a length failed its accuracy bound";
  }
  return slope;
}

// The device ladder's verdict (python/attest ladder(device_resident=True)): each length judged by
// device_judge, the slope over the lengths here, by the same rule as op_ladder.
json op_ladder_verdict(const json& req, int& rc) {
  std::vector<double> xs, ek, eb, ef;
  bool any_fail = false;
  for (const auto& e : req.at("table")) {
    const auto v = e.value("verdict", std::string());
    if (v != "passed" && v != "unsupported") any_fail = true;
    if (!e.contains("rel_l2")) continue;
    xs.push_back(e.at("length").get<double>());
    ek.push_back(e.at("rel_l2").get<double>());
    eb.push_back(e.at("budget_rel_l2").get<double>());
    ef.push_back(e.at("floor_rel_l2").get<double>());
  }
  std::string verdict, reason;
  const json slope = ladder_slope(xs, ek, eb, ef, req.value("slope_margin", 0.15), any_fail, verdict, reason);
  rc = verdict != "passed" && verdict != "unsupported" ? 1 : 0;
  return json{{"slope", slope}, {"verdict", verdict}, {"reason", reason}, {"exit_code", rc}};
}

json op_merge(const json& req, int& rc) {
  const auto c = case_from(req);
  auto& kernel = find_kernel(c.kernel);
  conformance::ToleranceTable holder;
  const auto& tol = tolerances(req, holder);
  conformance::Context ctx(c, kernel, tol);
  const auto shards = req.value("shards", std::vector<std::int64_t>{2, 4, 8});
  json j;
  j["results"] = json::array();
  rc = 0;
  for (const auto n : shards) {
    if (n < 2) throw Error("merge: shard count " + std::to_string(n) + " is not >= 2");
    const auto t0 = std::chrono::steady_clock::now();
    Outcome o;
    try {
      o = merge_one(ctx, n);
    } catch (const conformance::VerdictError& e) {
      o = {e.verdict, e.what(), json::object()};
    } catch (const Error& e) {
      o = {Verdict::error, e.what(), json::object()};
    }
    if (!conformance::verdict_ok(o.verdict)) rc = 1;
    j["results"].push_back(conformance::to_json(make_result(c, "merge" + std::to_string(n), std::move(o), seconds_since(t0))));
  }
  j["exit_code"] = rc;
  return j;
}

json op_ladder(const json& req, int& rc) {
  const std::string kname = req.at("kernel").get<std::string>();
  auto& kernel = find_kernel(kname);
  const Recipe recipe = parse_recipe(req.at("recipe").get<std::string>());
  Recipe emu_recipe = recipe;
  if (emu_recipe.exp2 == Exp2Policy::hw) emu_recipe.exp2 = Exp2Policy::cr;  // as the gate's Context does
  const auto lengths = req.at("lengths").get<std::vector<std::int64_t>>();
  const std::int64_t heads = req.value("heads", 1), heads_kv = req.value("heads_kv", heads);
  const std::int64_t d = req.value("head_dim", 128);
  const std::int64_t block = req.value("rows", 128), nblocks = req.value("blocks", 4);
  const double margin = req.value("slope_margin", 0.15);
  const auto dist = datasets::parse_distribution(req.value("dist", std::string("normal")));
  const auto seed = req.value("seed", std::uint64_t{1});
  if (lengths.size() < 3) throw Error("ladder: needs at least 3 lengths for a slope");
  if (block < 1 || nblocks < 1) throw Error("ladder: rows and blocks must be >= 1");
  conformance::ToleranceTable holder;
  const auto& tol = tolerances(req, holder);
  const auto& row = tol.lookup(recipe_label(recipe), "accuracy");

  json table = json::array();
  std::vector<double> xs, ek, eb, ef;
  rc = 0;
  bool any_fail = false;
  for (const auto L : lengths) {
    const auto t0 = std::chrono::steady_clock::now();
    Problem p;
    p.batch = 1;
    p.heads_q = heads;
    p.heads_kv = heads_kv;
    p.seqlen_q = p.seqlen_kv = L;
    p.head_dim = p.head_dim_v = d;
    json entry{{"length", L}, {"kv_tiles", (L + recipe.tile_kv - 1) / recipe.tile_kv}};
    if (auto st = kernel.supports(p, recipe); !st) {
      entry["verdict"] = "unsupported";
      entry["reason"] = st.reason();
      table.push_back(entry);
      continue;
    }
    conformance::Case c;
    c.kernel = kname;
    c.recipe = recipe;
    c.problem = p;
    c.dist = dist;
    c.seed = seed;
    conformance::Context ctx(c, kernel, tol);
    try {
      const auto& in = ctx.inputs();
      const auto tk = std::chrono::steady_clock::now();
      const auto& out = ctx.baseline();
      const double kernel_s = seconds_since(tk);
      // Contiguous blocks of `block` query rows, aligned to `block` (so a per-block Q quantizer
      // sees the same blocks as in the full problem), spread evenly from the first to the last.
      std::vector<std::int64_t> starts;
      const std::int64_t nb_all = (L + block - 1) / block;
      for (std::int64_t i = 0; i < std::min(nblocks, nb_all); ++i) {
        const std::int64_t b = nblocks == 1 || nb_all == 1 ? 0 : i * (nb_all - 1) / std::max<std::int64_t>(1, std::min(nblocks, nb_all) - 1);
        if (starts.empty() || starts.back() != b * block) starts.push_back(b * block);
      }
      std::vector<Tensor> kt, rt, et, ft;
      for (const auto s0 : starts) {
        const std::int64_t s1 = std::min(L, s0 + block);
        Problem ps = p;
        ps.seqlen_q = s1 - s0;
        const Tensor q = conformance::token_slice(in.q, s0, s1);
        const auto ref = ref::attention(ps, q, in.k, in.v, ref::Precision::fp64);
        const auto emu = ref::emulate(ps, emu_recipe, q, in.k, in.v);
        ref::EmulateOptions ro;
        ro.reverse_kv = true;
        const auto rev = ref::emulate(ps, emu_recipe, q, in.k, in.v, ro);
        kt.push_back(conformance::token_slice(out.out, s0, s1));
        // The reference stays f64: compare() takes f32 or f64 on either side.
        rt.push_back(ref.out);
        et.push_back(emu.out);
        ft.push_back(rev.out);
      }
      const Tensor K = concat_rows(kt), E = concat_rows(et), F = concat_rows(ft);
      const Tensor R = concat_rows(rt);  // the reference stays f64
      const std::int64_t total = R.dim(1);
      const auto mk = metrics::compare(K, R), mb = metrics::compare(E, R), mf = metrics::compare(F, E);
      const auto jd = conformance::judge(row, conformance::metric_set(mk, nullptr), conformance::metric_set(mb, nullptr),
                                         conformance::metric_set(mf, nullptr));
      entry["rows_sampled"] = total;
      entry["block_starts"] = starts;
      entry["kernel"] = comparison_json(mk);
      entry["budget"] = comparison_json(mb);
      entry["floor"] = comparison_json(mf);
      entry["rel_l2"] = mk.rel_l2;
      entry["budget_rel_l2"] = mb.rel_l2;
      entry["floor_rel_l2"] = mf.rel_l2;
      entry["max_abs"] = mk.max_abs;
      entry["kernel_seconds"] = kernel_s;
      entry["judgement"] = jd.figures;
      if (mk.nonfinite_mismatches > 0) {
        entry["verdict"] = "mistrusted";
        entry["reason"] = "kernel output has NaN/Inf where the reference has none";
        any_fail = true;
      } else {
        entry["verdict"] = jd.pass ? "passed" : "failed";
        if (!jd.pass) {
          entry["reason"] = jd.reason;
          any_fail = true;
        }
      }
      xs.push_back(static_cast<double>(L));
      ek.push_back(mk.rel_l2);
      eb.push_back(mb.rel_l2);
      ef.push_back(mf.rel_l2);
    } catch (const std::exception& e) {
      entry["verdict"] = "error";
      entry["reason"] = e.what();
      any_fail = true;
    }
    entry["seconds"] = seconds_since(t0);
    table.push_back(entry);
  }
  std::string verdict, reason;
  const json slope = ladder_slope(xs, ek, eb, ef, margin, any_fail, verdict, reason);
  if (verdict != "passed" && verdict != "unsupported") rc = 1;
  return json{{"kernel", kname},   {"recipe", recipe_label(recipe)}, {"table", table}, {"slope", slope},
              {"verdict", verdict}, {"reason", reason},               {"exit_code", rc}};
}

json op_pair(const json& req, int& rc) {
  const std::string ka = req.at("kernel_a").get<std::string>(), kb = req.at("kernel_b").get<std::string>();
  auto& a = find_kernel(ka);
  auto& b = find_kernel(kb);
  const std::string contract = req.value("contract", std::string("bitwise"));
  if (contract != "bitwise" && contract != "accuracy") throw Error("pair: contract '" + contract + "' is not bitwise or accuracy");
  auto profile = conformance::Profile::load(req.value("profile", std::string("cpu")));
  profile.kernels = {ka};
  profile.required = {};
  const auto file = case_file(req, profile);
  conformance::Selection sel;
  sel.kernel = ka;
  sel.check = "accuracy";  // one case per group: the pair needs the groups, not the checks
  const auto ex = conformance::expand(file, profile, sel);
  conformance::ToleranceTable holder;
  const auto& tol = tolerances(req, holder);
  json j;
  j["results"] = json::array();
  rc = 0;
  const std::string check = "pair_" + contract;
  for (const auto& c0 : ex.cases) {
    const auto t0 = std::chrono::steady_clock::now();
    conformance::Case c = c0;
    c.check.clear();
    conformance::Case cb = c;
    cb.kernel = kb;
    conformance::Context xa(c, a, tol), xb(cb, b, tol);
    Outcome o;
    try {
      if (auto st = xa.support(); !st) {
        o = {Verdict::unsupported, ka + ": " + st.reason(), json::object()};
      } else if (auto sb = xb.support(); !sb) {
        o = {Verdict::unsupported, kb + ": " + sb.reason(), json::object()};
      } else {
        const auto& oa = xa.baseline();
        const auto& ob = xb.baseline();
        const auto mo = metrics::compare(ob.out, oa.out, 8);
        json fig{{"out", comparison_json(mo)}};
        if (contract == "bitwise") {
          if (mo.bit_mismatches != 0) {
            const auto& m = mo.first_mismatches.front();
            o = {Verdict::failed,
                 fmt::format("{} vs {}: {} of {} output elements differ bitwise; first at {}: {:.9g} vs {:.9g}", kb, ka,
                             mo.bit_mismatches, mo.count, metrics::index_string(m.index), m.test, m.ref),
                 fig};
          } else {
            o = {Verdict::passed, "", fig};
          }
        } else {
          const auto& ref = xa.ref64();
          const auto& emu = xa.emu();
          const auto& rev = xa.emu_rev();
          const auto mb = metrics::compare(emu.out, ref.out), mf = metrics::compare(rev.out, emu.out);
          const auto& row = tol.lookup(xa.recipe_label(), "accuracy");
          const auto jd = conformance::judge(row, conformance::metric_set(mo, nullptr), conformance::metric_set(mb, nullptr),
                                             conformance::metric_set(mf, nullptr));
          fig["judgement"] = jd.figures;
          if (mo.nonfinite_mismatches > 0)
            o = {Verdict::failed, kb + " vs " + ka + ": NaN/Inf in one where the other has none", fig};
          else if (!jd.pass)
            o = {Verdict::failed, kb + " vs " + ka + ": " + jd.reason, fig};
          else
            o = {Verdict::passed, "", fig};
        }
      }
    } catch (const conformance::VerdictError& e) {
      // A side that refuses the case at call time (attest.Unsupported, NotImplementedError, a
      // framework's "No available kernel") leaves nothing to compare: the pair judges parity, the
      // gate's refusal row judges whether the refusal was declared.
      if (const auto& ra = xa.runtime_refusal())
        o = {Verdict::unsupported, ka + ": refused at call time: " + *ra, json::object()};
      else if (const auto& rb = xb.runtime_refusal())
        o = {Verdict::unsupported, kb + ": refused at call time: " + *rb, json::object()};
      else
        o = {e.verdict, e.what(), json::object()};
    } catch (const Error& e) {
      o = {Verdict::error, e.what(), json::object()};
    }
    if (!conformance::verdict_ok(o.verdict)) rc = 1;
    auto r = make_result(c, check, std::move(o), seconds_since(t0));
    auto jr = conformance::to_json(r);
    jr["kernel_b"] = kb;
    j["results"].push_back(jr);
  }
  j["exit_code"] = rc;
  return j;
}

}  // namespace attest::py
