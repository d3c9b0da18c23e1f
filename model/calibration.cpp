#include "calibration.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>
#include <thread>
#include <utility>

#include "dash_attn/tile_config.hpp"
#include "schedule_trace.hpp"
#include "simulate.hpp"

namespace dash_attn::model {
namespace {

constexpr int kStandardTokens = 16384;
constexpr int kStandardHidden = 2048;

// The fitted quantities: c, c_masked and the per-chain cost in the measured
// unit; r and s as fractions of c (the grid's coordinates).
struct Params {
  double c = 1, c_masked = 1, chain = 0, reduce_ratio = 0.5, handoff_ratio = 0;
};

CostModel cost_of(const Params& p, double scale = 1) {
  return kernel_cost_model(scale * p.c, scale * p.c_masked, scale * p.reduce_ratio * p.c,
                           scale * p.handoff_ratio * p.c, scale * p.chain);
}

// The scale minimizing sum (scale * m / y - 1)^2, and that sum: every point
// of the grid is judged at its best scale (makespans are homogeneous of
// degree 1 in the costs).
std::pair<double, double> best_scale(const std::vector<double>& modeled, const std::vector<double>& measured) {
  double sum = 0, sum_sq = 0;
  for (std::size_t i = 0; i < modeled.size(); ++i) {
    const double q = modeled[i] / measured[i];
    if (!std::isfinite(q)) return {1, std::numeric_limits<double>::infinity()};
    sum += q, sum_sq += q * q;
  }
  const double scale = sum_sq > 0 ? sum / sum_sq : 1;
  double error = 0;
  for (std::size_t i = 0; i < modeled.size(); ++i) error += std::pow(scale * modeled[i] / measured[i] - 1, 2);
  return {scale, error};
}

double relative_sq_error(const std::vector<double>& modeled, const std::vector<double>& measured) {
  double error = 0;
  for (std::size_t i = 0; i < modeled.size(); ++i) error += std::pow(modeled[i] / measured[i] - 1, 2);
  return std::isfinite(error) ? error : std::numeric_limits<double>::infinity();
}

std::vector<double> measured_of(const std::vector<CalibrationPoint>& points) {
  std::vector<double> y;
  for (const CalibrationPoint& p : points) y.push_back(p.measured);
  return y;
}

// Solves the (small, symmetric) normal equations a x = b by Gaussian
// elimination with partial pivoting; a zero pivot leaves that unknown at 0.
std::vector<double> solve(std::vector<std::vector<double>> a, std::vector<double> b) {
  const int n = static_cast<int>(b.size());
  for (int col = 0; col < n; ++col) {
    int pivot = col;
    for (int row = col + 1; row < n; ++row)
      if (std::abs(a[row][col]) > std::abs(a[pivot][col])) pivot = row;
    std::swap(a[col], a[pivot]);
    std::swap(b[col], b[pivot]);
    if (std::abs(a[col][col]) < 1e-300) continue;
    for (int row = col + 1; row < n; ++row) {
      const double f = a[row][col] / a[col][col];
      for (int k = col; k < n; ++k) a[row][k] -= f * a[col][k];
      b[row] -= f * b[col];
    }
  }
  std::vector<double> x(n, 0);
  for (int row = n - 1; row >= 0; --row) {
    if (std::abs(a[row][row]) < 1e-300) continue;
    double sum = b[row];
    for (int k = row + 1; k < n; ++k) sum -= a[row][k] * x[k];
    x[row] = sum / a[row][row];
  }
  return x;
}

class Fitter {
 public:
  Fitter(const std::vector<CalibrationPoint>& points, const CalibrationOptions& options)
      : points_(points), options_(options), measured_(measured_of(points)) {
    for (const CalibrationPoint& p : points)
      if (p.schedule == ScheduleKind::kAtomic) atomic_.push_back(p);
    if (atomic_.empty()) throw std::invalid_argument("calibration needs atomic rows (they fix c, c_masked and p)");
    atomic_measured_ = measured_of(atomic_);
  }

  Calibration run() {
    Params p = fit_atomic();
    const double scale = fit_ratios(p);
    Calibration out;
    out.cost = cost_of(p, scale);
    out.predicted = run_model(points_, out.cost);
    out.rms_relative_error = std::sqrt(relative_sq_error(out.predicted, measured_) / points_.size());
    out.evaluations = evaluations_;
    return out;
  }

 private:
  std::vector<double> run_model(const std::vector<CalibrationPoint>& points, const CostModel& cost) {
    ++evaluations_;
    return predict(points, cost, options_.workers, options_.threads);
  }

  // Stage 1: Gauss-Newton on (c, c_masked, chain) over the atomic rows.
  Params fit_atomic() {
    Params p;
    const auto [scale, unused] = best_scale(run_model(atomic_, cost_of(p)), atomic_measured_);
    p.c = p.c_masked = scale;
    double best_error = std::numeric_limits<double>::infinity();
    Params best = p;
    for (int iteration = 0; iteration < 8; ++iteration) {
      const std::vector<double> base = run_model(atomic_, cost_of(p));
      const double error = relative_sq_error(base, atomic_measured_);
      if (error >= best_error) break;  // a kink crossed: keep the better point
      best_error = error, best = p;
      // Columns: d(prediction)/d(c, c_masked, chain). Piecewise linear, so a
      // small forward difference is the count of each on the critical path.
      const double h = 1e-4 * p.c;
      std::vector<std::vector<double>> jacobian(3);
      for (int j = 0; j < 3; ++j) {
        Params moved = p;
        (j == 0 ? moved.c : j == 1 ? moved.c_masked : moved.chain) += h;
        // Moving c also moves r = ratio * c; keep r where it was.
        if (j == 0) moved.reduce_ratio = p.reduce_ratio * p.c / moved.c;
        const std::vector<double> shifted = run_model(atomic_, cost_of(moved));
        for (std::size_t i = 0; i < base.size(); ++i) jacobian[j].push_back((shifted[i] - base[i]) / h);
      }
      // Weighted normal equations (weights 1/y^2: relative errors) for the step.
      std::vector<std::vector<double>> a(3, std::vector<double>(3, 0));
      std::vector<double> b(3, 0);
      for (std::size_t i = 0; i < base.size(); ++i) {
        const double w = 1 / (atomic_measured_[i] * atomic_measured_[i]);
        for (int j = 0; j < 3; ++j) {
          b[j] += w * jacobian[j][i] * (atomic_measured_[i] - base[i]);
          for (int k = 0; k < 3; ++k) a[j][k] += w * jacobian[j][i] * jacobian[k][i];
        }
      }
      const std::vector<double> step = solve(a, b);
      Params next = p;
      next.c = std::max(p.c + step[0], 1e-6 * p.c);
      next.c_masked = std::max(p.c_masked + step[1], 0.0);
      next.chain = std::max(p.chain + step[2], 0.0);
      if (std::abs(next.c - p.c) + std::abs(next.c_masked - p.c_masked) + std::abs(next.chain - p.chain) <= 1e-12 * p.c)
        break;
      p = next;
    }
    return best;
  }

  // Stages 2 and 3: the (r/c, s/c) grid over all rows; returns the scale of
  // the best point and leaves its ratios in p.
  double fit_ratios(Params& p) {
    std::map<std::pair<double, double>, std::pair<double, double>> scored;  // ratios -> (scale, error)
    auto score = [&](double r, double s) {
      const auto key = std::make_pair(r, s);
      if (!scored.count(key)) {
        Params q = p;
        q.reduce_ratio = r, q.handoff_ratio = s;
        scored[key] = best_scale(run_model(points_, cost_of(q)), measured_);
      }
      return scored[key];
    };
    auto better = [](const std::pair<double, double>& a, const std::pair<double, double>& b) { return a.second < b.second; };
    std::pair<double, double> best_ratios{options_.reduce_ratios.front(), options_.handoff_ratios.front()};
    for (double r : options_.reduce_ratios)
      for (double s : options_.handoff_ratios)
        if (better(score(r, s), score(best_ratios.first, best_ratios.second))) best_ratios = {r, s};
    double step_r = grid_step(options_.reduce_ratios), step_s = grid_step(options_.handoff_ratios);
    for (int round = 0; round < options_.refinements; ++round) {
      step_r /= 2, step_s /= 2;
      const auto center = best_ratios;
      for (int i = -1; i <= 1; ++i)
        for (int j = -1; j <= 1; ++j) {
          const double r = center.first + i * step_r, s = center.second + j * step_s;
          if (r < 0 || s < 0) continue;
          if (better(score(r, s), score(best_ratios.first, best_ratios.second))) best_ratios = {r, s};
        }
    }
    p.reduce_ratio = best_ratios.first;
    p.handoff_ratio = best_ratios.second;
    return score(best_ratios.first, best_ratios.second).first;
  }

  static double grid_step(const std::vector<double>& grid) {
    if (grid.size() < 2) return 0;
    return (*std::max_element(grid.begin(), grid.end()) - *std::min_element(grid.begin(), grid.end())) /
           (grid.size() - 1);
  }

  const std::vector<CalibrationPoint>& points_;
  const CalibrationOptions& options_;
  std::vector<double> measured_;
  std::vector<CalibrationPoint> atomic_;
  std::vector<double> atomic_measured_;
  int evaluations_ = 0;
};

long long steps_of(const schedule::TileProblem& problem) {
  const schedule::HeadTiles t = problem.head_tiles(0);
  return static_cast<long long>(problem.batch) * problem.heads_q * t.q_tiles() * t.kv_tiles();
}

}  // namespace

CostModel kernel_cost_model(double compute, double compute_masked, double reduce, double handoff, double chain) {
  CostModel cost;
  cost.compute = compute;
  cost.compute_masked = compute_masked;
  cost.reduce = reduce;
  cost.handoff = handoff;
  cost.prologue = cost.epilogue = chain / 2;  // not separable: both are paid once per chain
  cost.overlap_reduce = true;
  cost.dq_writers = kBackwardDqStages;  // the kernel's structure (tile_config.hpp)
  cost.drain_between_chains = kBackwardDrainsBetweenChains;
  return cost;
}

schedule::TileProblem standard_problem(int head_dim, bool causal, int seqlen) {
  const TileShape tile = backward_tile(head_dim);
  schedule::TileProblem problem;
  problem.batch = std::max(1, kStandardTokens / seqlen);
  problem.heads_q = problem.heads_kv = std::max(1, kStandardHidden / head_dim);
  problem.block_m = tile.block_m;
  problem.block_n = tile.block_n;
  problem.causal = causal;
  problem.seqlen_q = problem.seqlen_k = seqlen;
  return problem;
}

Calibration calibrate(const std::vector<CalibrationPoint>& points, const CalibrationOptions& options) {
  for (const CalibrationPoint& p : points)
    if (!(p.measured > 0)) throw std::invalid_argument("calibration: measured times must be positive");
  return Fitter(points, options).run();
}

std::vector<double> predict(const std::vector<CalibrationPoint>& points, const CostModel& cost, int workers,
                            int threads) {
  // Largest problems first so that the threads finish together.
  std::vector<int> order(points.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return steps_of(points[a].problem) > steps_of(points[b].problem); });
  std::vector<double> out(points.size());
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t k = next++; k < order.size(); k = next++) {
      const CalibrationPoint& p = points[order[k]];
      const SimResult sim = simulate(build_trace(p.problem, p.schedule), workers, Assignment::kDynamic, cost);
      out[order[k]] = sim.deadlock ? std::numeric_limits<double>::infinity() : sim.makespan;
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  return out;
}

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  auto ranks = [](const std::vector<double>& v) {
    std::vector<double> r(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) {
      int below = 0, equal = 0;
      for (double x : v) below += x < v[i], equal += x == v[i];
      r[i] = below + (equal + 1) / 2.0;
    }
    return r;
  };
  const std::vector<double> ra = ranks(a), rb = ranks(b);
  const double n = static_cast<double>(a.size());
  double ma = 0, mb = 0;
  for (std::size_t i = 0; i < a.size(); ++i) ma += ra[i] / n, mb += rb[i] / n;
  double cov = 0, va = 0, vb = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    cov += (ra[i] - ma) * (rb[i] - mb);
    va += (ra[i] - ma) * (ra[i] - ma);
    vb += (rb[i] - mb) * (rb[i] - mb);
  }
  return va > 0 && vb > 0 ? cov / std::sqrt(va * vb) : 0;
}

}  // namespace dash_attn::model
