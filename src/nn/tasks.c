/* Evaluation tasks as data: checks, building a network from its recipe, and the
 * serialised form that carries a task set and its results between processes. */
#include "nevo/tasks.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nevo/rng.h"

#define TASKS_MAGIC "NEVOTSK1"
#define RESULTS_MAGIC "NEVORES1"
#define TASKS_VERSION 2u

/* The most floats a read set's bases may take once built (4 GiB): a crafted set of a
 * few KB cannot ask for more memory than that. The states its tasks keep are bounded
 * alike. */
#define MAX_BASE_FLOATS ((size_t)1 << 30)
#define MAX_STATES_CAP (1 << 20)

#define TASK_FLAGS (NEVO_TASK_RECORD_OBS | NEVO_TASK_RECORD_STATES)

static int any_scaled(const NevoTaskSet *ts) {
    for (int j = 0; j < ts->n_nets; j++)
        if (ts->nets[j].kind == NEVO_NET_SCALED) return 1;
    return 0;
}

/* a low-rank recipe, built or factored: its compact slice at `rank` */
static int lowrank_kind(uint32_t kind) { return kind == NEVO_NET_LOWRANK || kind == NEVO_NET_FACTORED; }

static int recording_states(const NevoTaskSet *ts) {
    int n = 0;
    for (int t = 0; t < ts->n_tasks; t++) n += (ts->tasks[t].flags & NEVO_TASK_RECORD_STATES) != 0;
    return n;
}

/* Structure alone: every index in range and every recipe well-formed. */
static NevoStatus check_structure(const NevoTaskSet *ts, NevoError *err) {
    if (ts->n_bases < 0 || ts->n_nets < 0 || ts->n_tasks < 0)
        return nevo_error(err, NEVO_ERR_INVALID, "task set: negative count");
    if (ts->nparams == 0) return nevo_error(err, NEVO_ERR_INVALID, "task set: networks of 0 parameters");
    if (ts->noise_floats != 0 && (ts->noise_floats <= ts->nparams || ts->noise_floats > NEVO_NOISE_MAX_FLOATS))
        return nevo_error(err, NEVO_ERR_INVALID, "task set: a noise table of %zu floats for networks of %zu",
                          ts->noise_floats, ts->nparams);
    if (ts->noise_floats == 0 && ts->chains)
        return nevo_error(err, NEVO_ERR_INVALID, "task set: seed chains without a noise table");
    for (int j = 0; j < ts->n_nets; j++) {
        const NevoNet *n = &ts->nets[j];
        if (n->kind > NEVO_NET_FACTORED)
            return nevo_error(err, NEVO_ERR_INVALID, "task set: network %d has unknown kind %u", j, n->kind);
        if (n->kind != NEVO_NET_INIT && (n->base < 0 || n->base >= ts->n_bases))
            return nevo_error(err, NEVO_ERR_INVALID, "task set: network %d names base %d of %d", j, n->base,
                              ts->n_bases);
        if (n->kind != NEVO_NET_BASE && ts->noise_floats == 0)
            return nevo_error(err, NEVO_ERR_INVALID, "task set: network %d needs noise, the set has none", j);
        if (n->kind == NEVO_NET_SCALED && !ts->scales)
            return nevo_error(err, NEVO_ERR_INVALID, "task set: network %d is scaled, the set has no scale rows", j);
        if (lowrank_kind(n->kind) && (n->rank < 1 || n->rank > NEVO_LOWRANK_MAX))
            return nevo_error(err, NEVO_ERR_INVALID, "task set: network %d has rank %u (1 to %d)", j, n->rank,
                              NEVO_LOWRANK_MAX);
        /* the factored forward computes a set's networks all one way: factored or none */
        if ((n->kind == NEVO_NET_FACTORED) != (ts->nets[0].kind == NEVO_NET_FACTORED))
            return nevo_error(err, NEVO_ERR_INVALID, "task set: network %d is %sfactored and network 0 is %s (a set's "
                              "networks are all factored or none)", j, n->kind == NEVO_NET_FACTORED ? "" : "not ",
                              n->kind == NEVO_NET_FACTORED ? "not" : "factored");
        if (n->kind == NEVO_NET_FACTORED && n->rank != ts->nets[0].rank)
            return nevo_error(err, NEVO_ERR_INVALID, "task set: factored network %d has rank %u, network 0 rank %u "
                              "(one rank a set)", j, n->rank, ts->nets[0].rank);
        if (n->kind != NEVO_NET_PERTURBED && n->kind != NEVO_NET_SCALED && !lowrank_kind(n->kind)) continue;
        if (n->purpose != NEVO_RNG_MUTATE && n->purpose != NEVO_RNG_ES_NOISE)
            return nevo_error(err, NEVO_ERR_INVALID, "task set: network %d perturbs with noise purpose %u", j,
                              n->purpose);
        if (n->sign != 1 && n->sign != -1)
            return nevo_error(err, NEVO_ERR_INVALID, "task set: network %d has sign %d (+1 or -1)", j, n->sign);
        if (!isfinite(n->sigma))
            return nevo_error(err, NEVO_ERR_INVALID, "task set: network %d has a non-finite sigma", j);
    }
    for (int t = 0; t < ts->n_tasks; t++) {
        const NevoTask *k = &ts->tasks[t];
        if (k->net < 0 || k->net >= ts->n_nets)
            return nevo_error(err, NEVO_ERR_INVALID, "task set: task %d names network %d of %d", t, k->net,
                              ts->n_nets);
        if (k->flags & ~TASK_FLAGS)
            return nevo_error(err, NEVO_ERR_INVALID, "task set: task %d has unknown flags 0x%x", t, k->flags);
    }
    if (ts->chains)
        for (int b = 0; b < ts->n_bases; b++) {
            if (ts->chains[b].rank < 0 || ts->chains[b].rank > NEVO_LOWRANK_MAX)
                return nevo_error(err, NEVO_ERR_INVALID, "task set: base %d's chain has rank %d (0 to %d)", b,
                                  ts->chains[b].rank, NEVO_LOWRANK_MAX);
            for (int j = 0; j < ts->chains[b].n; j++)
                if (!isfinite(ts->chains[b].muts[j].sigma))
                    return nevo_error(err, NEVO_ERR_INVALID, "task set: base %d has a non-finite mutation", b);
        }
    if (ts->scales) {
        if (ts->base_stride < ts->nparams)
            return nevo_error(err, NEVO_ERR_INVALID, "task set's scale rows are %zu floats apart, closer than a "
                              "network", ts->base_stride);
        for (int b = 0; b < ts->n_bases; b++)
            for (size_t k = 0; k < ts->nparams; k++) {
                float v = ts->scales[(size_t)b * ts->base_stride + k];
                if (!(v > 0.0f) || !isfinite(v))
                    return nevo_error(err, NEVO_ERR_INVALID, "task set: scale %zu of base %d is %g (finite and > 0)",
                                      k, b, (double)v);
            }
    }
    /* the states kept: what the caller allocates for the flagged tasks, bounded */
    int recording = recording_states(ts);
    if (recording && (ts->states_cap < 1 || ts->states_cap > MAX_STATES_CAP || ts->obs_dim < 1 ||
                      (double)ts->states_cap * ts->obs_dim * recording > (double)MAX_BASE_FLOATS))
        return nevo_error(err, NEVO_ERR_INVALID, "task set: %d tasks keep %d states of %d floats each (at most %d "
                          "states, %zu floats in all)", recording, ts->states_cap, ts->obs_dim, MAX_STATES_CAP,
                          MAX_BASE_FLOATS);
    return NEVO_OK;
}

void nevo_perturb_scaled(float *out, const float *theta, float sigma, const float *eps, const float *scale,
                         int sign, size_t n) {
    for (size_t k = 0; k < n; k++) {
        float d = sigma * eps[k];
        d = d / scale[k];
        d = d > NEVO_SCALED_CLIP ? NEVO_SCALED_CLIP : d < -NEVO_SCALED_CLIP ? -NEVO_SCALED_CLIP : d;
        out[k] = sign > 0 ? theta[k] + d : theta[k] - d;
    }
}

void nevo_taskset_for_policy(NevoTaskSet *ts, const NevoPolicy *policy, const NevoEnv *env) {
    memset(ts, 0, sizeof *ts);
    ts->nparams = policy->nparams;
    if (env) {
        const NevoEnvSpec *spec = nevo_env_spec(env);
        snprintf(ts->env, sizeof ts->env, "%s", spec->name);
        ts->max_steps = spec->max_steps;
    }
    ts->obs_dim = policy->obs_dim;
    if (policy->obs_norm) {
        ts->obs_mean = policy->obs_mean;
        ts->obs_std = policy->obs_std;
    }
}

NevoStatus nevo_taskset_check(const NevoTaskSet *ts, const NevoPolicy *policy, const NevoEnv *env,
                              NevoError *err) {
    NevoStatus st = check_structure(ts, err);
    if (st) return st;
    if (ts->nparams != policy->nparams)
        return nevo_error(err, NEVO_ERR_INVALID, "task set is for networks of %zu parameters, the policy has %zu",
                          ts->nparams, policy->nparams);
    const NevoEnvSpec *spec = env ? nevo_env_spec(env) : NULL;
    if (!spec && ts->max_steps != 0)
        return nevo_error(err, NEVO_ERR_INVALID, "task set on a dataset caps episodes at %d steps", ts->max_steps);
    if (spec && strcmp(ts->env, spec->name) != 0)
        return nevo_error(err, NEVO_ERR_INVALID, "task set is for env %s, not %s", ts->env, spec->name);
    if (spec && ts->max_steps != spec->max_steps)
        return nevo_error(err, NEVO_ERR_INVALID, "task set caps episodes at %d steps, the env at %d", ts->max_steps,
                          spec->max_steps);
    if (!policy->obs_norm != !ts->obs_mean || ts->obs_dim != policy->obs_dim)
        return nevo_error(err, NEVO_ERR_INVALID, "task set and policy differ in observation normalisation");
    if (ts->obs_mean && (memcmp(ts->obs_mean, policy->obs_mean, sizeof(float) * (size_t)ts->obs_dim) != 0 ||
                         memcmp(ts->obs_std, policy->obs_std, sizeof(float) * (size_t)ts->obs_dim) != 0))
        return nevo_error(err, NEVO_ERR_INVALID,
                          "task set's observation normalisation is not the policy's: apply it first");
    if (ts->n_bases > 0 && !ts->bases)
        return nevo_error(err, NEVO_ERR_INVALID, "task set's bases are chains: materialise them first");
    if (ts->n_bases > 0 && ts->base_stride < ts->nparams)
        return nevo_error(err, NEVO_ERR_INVALID, "task set's bases are %zu floats apart, closer than a network",
                          ts->base_stride);
    int needs_noise = 0;
    for (int j = 0; j < ts->n_nets; j++) needs_noise |= ts->nets[j].kind != NEVO_NET_BASE;
    if (needs_noise && (!ts->noise || ts->noise->size != ts->noise_floats || ts->noise->size <= ts->nparams))
        return nevo_error(err, NEVO_ERR_INVALID, "task set needs a noise table of %zu floats", ts->noise_floats);
    for (int j = 0; j < ts->n_nets; j++) /* a compact slice never exceeds a full one: it fits */
        if (lowrank_kind(ts->nets[j].kind) && nevo_lowrank_floats(policy, (int)ts->nets[j].rank) >= ts->noise_floats)
            return nevo_error(err, NEVO_ERR_INVALID, "task set: network %d's rank-%u noise is longer than the noise "
                              "table", j, ts->nets[j].rank);
    if (ts->n_nets > 0 && ts->nets[0].kind == NEVO_NET_FACTORED && policy->lstm_layer >= 0)
        return nevo_error(err, NEVO_ERR_INVALID, "task set: factored networks need a feed-forward policy, this one "
                          "has an LSTM");
    return NEVO_OK;
}

static const float *base_of(const NevoTaskSet *ts, const NevoNet *n) {
    return ts->bases + (size_t)n->base * ts->base_stride;
}

/* a perturbation's noise slice: nparams floats, or a low-rank recipe's compact slice */
static const float *slice_of(const NevoTaskSet *ts, const NevoPolicy *policy, const NevoNet *n) {
    size_t len = lowrank_kind(n->kind) ? nevo_lowrank_floats(policy, (int)n->rank) : ts->nparams;
    return nevo_noise_slice(ts->noise, len, ts->seed, n->purpose, n->generation, n->individual, 0);
}

const float *nevo_taskset_slice(const NevoTaskSet *ts, const NevoPolicy *policy, int net) {
    return slice_of(ts, policy, &ts->nets[net]);
}

/* base +- sigma eps of a low-rank recipe */
static void build_lowrank(const NevoTaskSet *ts, const NevoPolicy *policy, const NevoNet *n, float *plus,
                          float *minus) {
    nevo_lowrank_perturb(policy, (int)n->rank, slice_of(ts, policy, n), n->sigma, base_of(ts, n), plus, minus);
}

void nevo_taskset_build(const NevoTaskSet *ts, const NevoPolicy *policy, int net, float *theta, int stream) {
    const NevoNet *n = &ts->nets[net];
    if (n->kind == NEVO_NET_BASE)
        memcpy(theta, base_of(ts, n), sizeof(float) * ts->nparams);
    else if (n->kind == NEVO_NET_INIT)
        nevo_policy_init_params(policy, ts->noise, ts->seed, n->generation, n->individual, theta);
    else if (n->kind == NEVO_NET_SCALED)
        nevo_perturb_scaled(theta, base_of(ts, n), n->sigma, slice_of(ts, policy, n),
                            ts->scales + (size_t)n->base * ts->base_stride, n->sign, ts->nparams);
    else if (lowrank_kind(n->kind))
        build_lowrank(ts, policy, n, n->sign > 0 ? theta : NULL, n->sign > 0 ? NULL : theta);
    else
        nevo_perturb_rows(n->sign > 0 ? theta : NULL, n->sign > 0 ? NULL : theta, base_of(ts, n), n->sigma,
                          slice_of(ts, policy, n), ts->nparams, stream);
}

void nevo_taskset_build_pair(const NevoTaskSet *ts, const NevoPolicy *policy, int net, float *plus, float *minus,
                             int stream) {
    const NevoNet *n = &ts->nets[net];
    if (lowrank_kind(n->kind))
        build_lowrank(ts, policy, n, plus, minus);
    else
        nevo_perturb_rows(plus, minus, base_of(ts, n), n->sigma, slice_of(ts, policy, n), ts->nparams, stream);
}

int nevo_taskset_is_pair(const NevoTaskSet *ts, int j) {
    if (j + 1 >= ts->n_nets) return 0;
    const NevoNet *a = &ts->nets[j], *b = &ts->nets[j + 1];
    return (a->kind == NEVO_NET_PERTURBED || lowrank_kind(a->kind)) && b->kind == a->kind &&
           a->rank == b->rank && a->base == b->base &&
           a->purpose == b->purpose && a->generation == b->generation && a->individual == b->individual &&
           a->sigma == b->sigma && a->sign == 1 && b->sign == -1;
}

void nevo_taskset_factor_row(const NevoTaskSet *ts, const NevoPolicy *policy, int net, float *row) {
    const NevoNet *n = &ts->nets[net];
    NEVO_ASSERT(n->kind == NEVO_NET_FACTORED);
    nevo_factor_row(policy, (int)n->rank, slice_of(ts, policy, n), n->sign > 0 ? n->sigma : -n->sigma, row);
}

/* --- serialised form --------------------------------------------------------------- */

/* A set read from bytes, owning every array its NevoTaskSet points to. */
typedef struct OwnedTaskSet {
    NevoTaskSet ts; /* first: nevo_taskset_free takes the NevoTaskSet */
    float *bases, *obs_mean, *obs_std, *scales;
    NevoChain *chains;
    NevoMutation *muts;
    NevoNet *nets;
    NevoTask *tasks;
} OwnedTaskSet;

NevoStatus nevo_taskset_write(const NevoTaskSet *ts, NevoBuf *out, NevoError *err) {
    NevoStatus st = check_structure(ts, err);
    if (st) return st;
    if (ts->n_bases > 0 && !ts->bases && !ts->chains)
        return nevo_error(err, NEVO_ERR_INVALID, "task set: bases have neither floats nor chains");
    NevoBuf p = {0};
    nevo_buf_u64(&p, ts->seed);
    nevo_buf_u64(&p, ts->noise_floats);
    nevo_buf_u64(&p, ts->nparams);
    nevo_buf_str(&p, ts->env);
    nevo_buf_u32(&p, (uint32_t)ts->max_steps);
    nevo_buf_u32(&p, (uint32_t)ts->obs_dim);
    nevo_buf_u32(&p, ts->obs_mean ? 1u : 0u);
    if (ts->obs_mean) {
        nevo_buf_f32s(&p, ts->obs_mean, (size_t)ts->obs_dim);
        nevo_buf_f32s(&p, ts->obs_std, (size_t)ts->obs_dim);
    }
    /* bases: as chains where there are any (bytes instead of nparams floats each) */
    nevo_buf_u32(&p, (uint32_t)ts->n_bases);
    nevo_buf_u32(&p, ts->chains ? 1u : 0u);
    for (int b = 0; b < ts->n_bases; b++) {
        if (ts->chains) {
            nevo_buf_u32(&p, (uint32_t)ts->chains[b].rank); /* the chain's bytes leave it out */
            nevo_chain_write(&p, &ts->chains[b]);
        } else {
            nevo_buf_f32s(&p, ts->bases + (size_t)b * ts->base_stride, ts->nparams);
        }
    }
    nevo_buf_u32(&p, (uint32_t)ts->n_nets);
    for (int j = 0; j < ts->n_nets; j++) {
        const NevoNet *n = &ts->nets[j];
        nevo_buf_u32(&p, n->kind);
        nevo_buf_u32(&p, (uint32_t)n->base);
        nevo_buf_u32(&p, n->purpose);
        nevo_buf_u32(&p, n->generation);
        nevo_buf_u32(&p, n->individual);
        nevo_buf_put(&p, &n->sigma, 4);
        nevo_buf_u32(&p, (uint32_t)n->sign);
        if (lowrank_kind(n->kind)) nevo_buf_u32(&p, n->rank);
    }
    nevo_buf_u32(&p, (uint32_t)ts->n_tasks);
    for (int t = 0; t < ts->n_tasks; t++) {
        nevo_buf_u32(&p, (uint32_t)ts->tasks[t].net);
        nevo_buf_u32(&p, ts->tasks[t].flags);
        nevo_buf_u64(&p, ts->tasks[t].seed);
    }
    /* what safe mutations add, only where a set uses it: the states' cap, and the
     * scale rows of the bases */
    if (recording_states(ts)) nevo_buf_u32(&p, (uint32_t)ts->states_cap);
    if (any_scaled(ts))
        for (int b = 0; b < ts->n_bases; b++) nevo_buf_f32s(&p, ts->scales + (size_t)b * ts->base_stride, ts->nparams);
    nevo_container_encode(TASKS_MAGIC, TASKS_VERSION, &p, out);
    nevo_buf_free(&p);
    return NEVO_OK;
}

/* A count read from r, refused where its elements (at least `each` bytes apiece)
 * could not fit in what is left of the payload: no allocation beyond the data. */
static int read_count(NevoReader *r, size_t each, int *n) {
    uint32_t v = nevo_read_u32(r);
    if (r->failed || v > (uint32_t)0x7fffffff || (each && (size_t)v > (r->len - r->pos) / each)) return 0;
    *n = (int)v;
    return 1;
}

NevoStatus nevo_taskset_read(const uint8_t *data, size_t len, NevoTaskSet **out, NevoError *err) {
    *out = NULL;
    const uint8_t *payload;
    size_t plen;
    NevoStatus st = nevo_container_decode(data, len, "task set", TASKS_MAGIC, TASKS_VERSION, &payload, &plen, err);
    if (st) return st;
    OwnedTaskSet *o = nevo_alloc(sizeof *o);
    NevoTaskSet *ts = &o->ts;
    NevoReader r = nevo_reader(payload, plen);
    ts->seed = nevo_read_u64(&r);
    ts->noise_floats = (size_t)nevo_read_u64(&r);
    ts->nparams = (size_t)nevo_read_u64(&r);
    char *env = nevo_read_str(&r, sizeof ts->env - 1); /* "" where it does not fit */
    memcpy(ts->env, env, strlen(env) + 1);
    free(env);
    ts->max_steps = (int)nevo_read_u32(&r);
    int chains, ok = ts->max_steps >= 0 && ts->nparams > 0 && ts->nparams < NEVO_NOISE_MAX_FLOATS &&
                     read_count(&r, 0, &ts->obs_dim);
    uint32_t norm = nevo_read_u32(&r);
    ok = ok && norm <= 1 && (!norm || (size_t)ts->obs_dim <= (r.len - r.pos) / 8);
    if (ok && norm) {
        int obs_dim = ts->obs_dim;
        o->obs_mean = nevo_alloc(sizeof(float) * (size_t)obs_dim);
        o->obs_std = nevo_alloc(sizeof(float) * (size_t)obs_dim);
        nevo_read_f32s(&r, o->obs_mean, (size_t)obs_dim);
        nevo_read_f32s(&r, o->obs_std, (size_t)obs_dim);
        ts->obs_mean = o->obs_mean;
        ts->obs_std = o->obs_std;
    }
    ok = ok && read_count(&r, 4, &ts->n_bases);
    chains = (int)nevo_read_u32(&r);
    ok = ok && (chains == 0 || chains == 1) && (size_t)ts->n_bases <= MAX_BASE_FLOATS / ts->nparams;
    if (ok && chains) {
        o->chains = nevo_alloc(sizeof(NevoChain) * (size_t)(ts->n_bases ? ts->n_bases : 1));
        /* all mutations in one array: count them first, each chain its rank (4 bytes),
         * a 12-byte head and 12 bytes a mutation in the payload */
        size_t total = 0;
        NevoReader scan = r;
        for (int b = 0; b < ts->n_bases && ok; b++) {
            ok = scan.len - scan.pos >= 16;
            if (!ok) break;
            scan.pos += 4;
            uint32_t n = nevo_chain_peek_count(&scan);
            size_t left = scan.len - scan.pos;
            ok = n <= (left - 12) / 12;
            scan.pos += 12 + (size_t)n * 12;
            total += n;
        }
        if (ok) o->muts = nevo_alloc(sizeof(NevoMutation) * (total ? total : 1));
        size_t used = 0;
        for (int b = 0; b < ts->n_bases && ok; b++) {
            uint32_t rank = nevo_read_u32(&r);
            ok = nevo_chain_read(&r, &o->chains[b], o->muts + used, total - used);
            o->chains[b].rank = rank > INT32_MAX ? -1 : (int)rank; /* check_structure bounds it */
            used += (size_t)o->chains[b].n;
        }
        ts->chains = o->chains;
    } else if (ok && ts->n_bases > 0) {
        ok = (size_t)ts->n_bases <= (r.len - r.pos) / (4 * ts->nparams);
        if (ok) {
            o->bases = nevo_alloc_aligned(sizeof(float) * ts->nparams * (size_t)ts->n_bases);
            nevo_read_f32s(&r, o->bases, ts->nparams * (size_t)ts->n_bases);
            ts->bases = o->bases;
            ts->base_stride = ts->nparams;
        }
    }
    /* the evaluator may build every network once (a row each): bounded as the bases */
    ok = ok && read_count(&r, 28, &ts->n_nets) && (size_t)ts->n_nets <= MAX_BASE_FLOATS / ts->nparams;
    if (ok) {
        o->nets = nevo_alloc(sizeof(NevoNet) * (size_t)(ts->n_nets ? ts->n_nets : 1));
        for (int j = 0; j < ts->n_nets; j++) {
            NevoNet *n = &o->nets[j];
            n->kind = nevo_read_u32(&r);
            n->base = (int32_t)nevo_read_u32(&r);
            n->purpose = nevo_read_u32(&r);
            n->generation = nevo_read_u32(&r);
            n->individual = nevo_read_u32(&r);
            nevo_read(&r, &n->sigma, 4);
            n->sign = (int32_t)nevo_read_u32(&r);
            if (lowrank_kind(n->kind)) n->rank = nevo_read_u32(&r);
        }
        ts->nets = o->nets;
    }
    ok = ok && read_count(&r, 16, &ts->n_tasks);
    if (ok) {
        o->tasks = nevo_alloc(sizeof(NevoTask) * (size_t)(ts->n_tasks ? ts->n_tasks : 1));
        for (int t = 0; t < ts->n_tasks; t++) {
            o->tasks[t].net = (int)nevo_read_u32(&r);
            o->tasks[t].flags = nevo_read_u32(&r);
            o->tasks[t].seed = nevo_read_u64(&r);
        }
        ts->tasks = o->tasks;
    }
    if (ok && recording_states(ts)) ok = read_count(&r, 0, &ts->states_cap);
    if (ok && any_scaled(ts)) {
        ok = (size_t)ts->n_bases <= (r.len - r.pos) / (4 * ts->nparams);
        if (ok) {
            o->scales = nevo_alloc_aligned(sizeof(float) * ts->nparams * (size_t)(ts->n_bases ? ts->n_bases : 1));
            nevo_read_f32s(&r, o->scales, ts->nparams * (size_t)ts->n_bases);
            ts->scales = o->scales;
            ts->base_stride = ts->nparams;
        }
    }
    if (!ok || !nevo_reader_ok(&r, true)) {
        nevo_taskset_free(ts);
        return nevo_error(err, NEVO_ERR_CORRUPT, "task set: truncated or inconsistent data");
    }
    if ((st = check_structure(ts, err))) {
        nevo_taskset_free(ts);
        if (err) err->status = NEVO_ERR_CORRUPT;
        return NEVO_ERR_CORRUPT;
    }
    ts->owner = o;
    *out = ts;
    return NEVO_OK;
}

NevoStatus nevo_taskset_materialise(NevoTaskSet *ts, const NevoPolicy *policy, const NevoNoise *noise,
                                    NevoError *err) {
    NEVO_ASSERT(ts->owner == (const void *)ts); /* a set nevo_taskset_read made */
    OwnedTaskSet *o = (OwnedTaskSet *)ts;
    if (ts->nparams != policy->nparams)
        return nevo_error(err, NEVO_ERR_INVALID, "task set is for networks of %zu parameters, the policy has %zu",
                          ts->nparams, policy->nparams);
    if (ts->noise_floats > 0 && (!noise || noise->size != ts->noise_floats))
        return nevo_error(err, NEVO_ERR_INVALID, "task set needs a noise table of %zu floats, not %zu",
                          ts->noise_floats, noise ? noise->size : 0);
    ts->noise = ts->noise_floats > 0 ? noise : NULL;
    for (int b = 0; ts->chains && !ts->bases && b < ts->n_bases; b++) /* a compact slice within the table */
        if (ts->chains[b].rank > 0 && nevo_lowrank_floats(policy, ts->chains[b].rank) >= ts->noise_floats)
            return nevo_error(err, NEVO_ERR_INVALID, "task set: base %d's rank-%d mutations are longer than the "
                              "noise table", b, ts->chains[b].rank);
    if (ts->chains && !ts->bases) {
        o->bases = nevo_alloc_aligned(sizeof(float) * ts->nparams * (size_t)(ts->n_bases ? ts->n_bases : 1));
        for (int b = 0; b < ts->n_bases; b++)
            nevo_chain_build(policy, noise, ts->seed, &ts->chains[b], o->bases + (size_t)b * ts->nparams);
        ts->bases = o->bases;
        ts->base_stride = ts->nparams;
    }
    return NEVO_OK;
}

NevoStatus nevo_taskset_prepare_policy(const NevoTaskSet *ts, NevoPolicy *policy, NevoError *err) {
    if (ts->obs_dim != policy->obs_dim || !ts->obs_mean != !policy->obs_norm)
        return nevo_error(err, NEVO_ERR_INVALID, "task set and policy differ in observation normalisation");
    if (ts->obs_mean) {
        for (int i = 0; i < ts->obs_dim; i++)
            if (!isfinite(ts->obs_mean[i]) || !(ts->obs_std[i] > 0.0f) || !isfinite(ts->obs_std[i]))
                return nevo_error(err, NEVO_ERR_INVALID, "task set: observation normalisation %d is not usable", i);
        memcpy(policy->obs_mean, ts->obs_mean, sizeof(float) * (size_t)ts->obs_dim);
        memcpy(policy->obs_std, ts->obs_std, sizeof(float) * (size_t)ts->obs_dim);
    }
    return NEVO_OK;
}

void nevo_taskset_free(NevoTaskSet *ts) {
    if (!ts) return;
    NEVO_ASSERT(!ts->owner || ts->owner == (const void *)ts); /* a set nevo_taskset_read made */
    OwnedTaskSet *o = (OwnedTaskSet *)ts;
    free(o->bases);
    free(o->scales);
    free(o->obs_mean);
    free(o->obs_std);
    free(o->chains);
    free(o->muts);
    free(o->nets);
    free(o->tasks);
    free(o);
}

/* --- states ------------------------------------------------------------------------- */

void nevo_states_init(NevoStates *s, int dim, int cap) {
    NEVO_ASSERT(dim >= 1 && cap >= 0);
    memset(s, 0, sizeof *s);
    s->dim = dim;
    s->cap = cap;
    s->stride = 1;
    s->obs = nevo_alloc(sizeof(float) * (size_t)dim * (size_t)(cap ? cap : 1));
}

void nevo_states_free(NevoStates *s) {
    free(s->obs);
    memset(s, 0, sizeof *s);
}

void nevo_states_clear(NevoStates *s) {
    s->n = 0;
    s->seen = 0;
    s->stride = 1;
}

void nevo_states_add(NevoStates *s, const float *obs) {
    int t = s->seen;
    if (s->seen < INT32_MAX) s->seen++;
    if (s->cap < 1 || t % s->stride) return;
    size_t d = (size_t)s->dim;
    if (s->n == s->cap) {
        if (s->stride > INT32_MAX / 2) return; /* an episode of 2^30 steps keeps what it has */
        /* full: keep the steps at multiples of twice the stride (every second kept one) */
        int kept = 0;
        for (int i = 0; i < s->n; i += 2, kept++)
            if (i != kept) memcpy(s->obs + (size_t)kept * d, s->obs + (size_t)i * d, sizeof(float) * d);
        s->n = kept;
        s->stride *= 2;
        if (t % s->stride) return;
    }
    memcpy(s->obs + (size_t)s->n * d, obs, sizeof(float) * d);
    s->n++;
}

/* --- results ------------------------------------------------------------------------ */

NevoStatus nevo_results_write(const NevoTaskSet *ts, const NevoEpisode *results, const NevoObsStats *task_stats,
                              const NevoStates *task_states, NevoBuf *out, NevoError *err) {
    NevoBuf p = {0};
    nevo_buf_u32(&p, (uint32_t)ts->n_tasks);
    for (int t = 0; t < ts->n_tasks; t++) {
        const NevoEpisode *e = &results[t];
        nevo_buf_f64(&p, e->ret);
        nevo_buf_u32(&p, (uint32_t)e->length);
        nevo_buf_u32(&p, (uint32_t)e->terminated);
        nevo_buf_f32s(&p, e->bc, NEVO_ENV_MAX_BC);
    }
    for (int t = 0; t < ts->n_tasks; t++) {
        if (!(ts->tasks[t].flags & NEVO_TASK_RECORD_OBS)) continue;
        if (!task_stats) {
            nevo_buf_free(&p);
            return nevo_error(err, NEVO_ERR_INVALID, "results: task %d records observations, but no stats given", t);
        }
        const NevoObsStats *s = &task_stats[t];
        nevo_buf_u32(&p, (uint32_t)s->dim);
        nevo_buf_f64(&p, s->count);
        nevo_buf_f64s(&p, s->sum, (size_t)s->dim);
        nevo_buf_f64s(&p, s->sumsq, (size_t)s->dim);
    }
    /* the states kept, only where tasks keep them */
    for (int t = 0; t < ts->n_tasks; t++) {
        if (!(ts->tasks[t].flags & NEVO_TASK_RECORD_STATES)) continue;
        const NevoStates *s = task_states ? &task_states[t] : NULL;
        if (!s || s->dim != ts->obs_dim || s->n < 0 || s->n > ts->states_cap) {
            nevo_buf_free(&p);
            return nevo_error(err, NEVO_ERR_INVALID, "results: task %d keeps states, but none of this set's are given",
                              t);
        }
        nevo_buf_u32(&p, (uint32_t)s->n);
        nevo_buf_f32s(&p, s->obs, (size_t)s->n * (size_t)s->dim);
    }
    nevo_container_encode(RESULTS_MAGIC, TASKS_VERSION, &p, out);
    nevo_buf_free(&p);
    return NEVO_OK;
}

NevoStatus nevo_results_read(const NevoTaskSet *ts, const uint8_t *data, size_t len, NevoEpisode *results,
                             NevoObsStats *task_stats, NevoStates *task_states, NevoError *err) {
    const uint8_t *payload;
    size_t plen;
    NevoStatus st = nevo_container_decode(data, len, "results", RESULTS_MAGIC, TASKS_VERSION, &payload, &plen, err);
    if (st) return st;
    NevoReader r = nevo_reader(payload, plen);
    if (nevo_read_u32(&r) != (uint32_t)ts->n_tasks)
        return nevo_error(err, NEVO_ERR_CORRUPT, "results: not the results of this task set (%d tasks)", ts->n_tasks);
    int bad = 0;
    for (int t = 0; t < ts->n_tasks; t++) {
        NevoEpisode *e = &results[t];
        e->ret = nevo_read_f64(&r);
        e->length = (int)nevo_read_u32(&r);
        e->terminated = (int)nevo_read_u32(&r);
        nevo_read_f32s(&r, e->bc, NEVO_ENV_MAX_BC);
        bad |= e->length < 0 || (e->terminated != 0 && e->terminated != 1) || !isfinite(e->ret);
        for (int c = 0; c < NEVO_ENV_MAX_BC; c++) bad |= !isfinite(e->bc[c]);
    }
    int opened = 0;
    for (int t = 0; t < ts->n_tasks && !bad; t++) {
        if (!(ts->tasks[t].flags & NEVO_TASK_RECORD_OBS)) continue;
        bad = !task_stats || (int)nevo_read_u32(&r) != ts->obs_dim || ts->obs_dim <= 0 ||
              (size_t)ts->obs_dim > (r.len - r.pos) / 16;
        if (bad) break;
        NevoObsStats *s = &task_stats[t];
        nevo_obs_stats_init(s, ts->obs_dim);
        opened = t + 1;
        s->count = nevo_read_f64(&r);
        nevo_read_f64s(&r, s->sum, (size_t)s->dim);
        nevo_read_f64s(&r, s->sumsq, (size_t)s->dim);
        /* what an evaluation can give: a finite count of observations, finite sums */
        bad = !(s->count >= 0.0) || !isfinite(s->count);
        for (int i = 0; i < s->dim && !bad; i++)
            bad = !isfinite(s->sum[i]) || !isfinite(s->sumsq[i]) || !(s->sumsq[i] >= 0.0);
    }
    int opened_states = 0;
    for (int t = 0; t < ts->n_tasks && !bad; t++) {
        if (!(ts->tasks[t].flags & NEVO_TASK_RECORD_STATES)) continue;
        uint32_t n = nevo_read_u32(&r);
        /* at most the set's cap, and no more than the bytes left hold */
        bad = !task_states || ts->obs_dim <= 0 || r.failed || n > (uint32_t)ts->states_cap ||
              (size_t)n > (r.len - r.pos) / (4 * (size_t)ts->obs_dim);
        if (bad) break;
        NevoStates *s = &task_states[t];
        nevo_states_init(s, ts->obs_dim, (int)n);
        opened_states = t + 1;
        s->n = (int)n;
        nevo_read_f32s(&r, s->obs, (size_t)n * (size_t)ts->obs_dim);
        for (size_t i = 0; i < (size_t)n * (size_t)ts->obs_dim && !bad; i++) bad = !isfinite(s->obs[i]);
    }
    if (bad || !nevo_reader_ok(&r, true)) {
        for (int t = 0; t < opened; t++)
            if (ts->tasks[t].flags & NEVO_TASK_RECORD_OBS) nevo_obs_stats_free(&task_stats[t]);
        for (int t = 0; t < opened_states; t++)
            if (ts->tasks[t].flags & NEVO_TASK_RECORD_STATES) nevo_states_free(&task_states[t]);
        return nevo_error(err, NEVO_ERR_CORRUPT, "results: truncated or inconsistent data");
    }
    return NEVO_OK;
}
