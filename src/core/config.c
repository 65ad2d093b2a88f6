/* Config schema, JSON loading (jansson), overrides, validation and dumping. */
#include "nevo/config.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/strutil.h"
#include "nevo/io.h"
#include "nevo/noise.h"
#include "nevo/threads.h"

typedef enum KeyType { T_INT, T_I64, T_U64, T_DOUBLE, T_BOOL, T_STRING, T_INT_LIST } KeyType;

typedef struct Key {
    const char *name;
    KeyType type;
    size_t offset;
    double min, max;         /* numeric range (inclusive); list elements for T_INT_LIST;
                              * T_STRING: min = MAY_BE_EMPTY allows "" */
    const char *choices;     /* T_STRING: "a|b|c" */
    size_t size;             /* T_STRING: buffer size; T_INT_LIST: capacity */
    size_t count_offset;     /* T_INT_LIST: offset of its int count */
    const char *help;
} Key;

#define OFF(field) offsetof(NevoConfig, field)
#define MAY_BE_EMPTY 1
#define BIG 1e18

static const Key schema[] = {
    {"env", T_STRING, OFF(env), 0, 0, NULL, sizeof(((NevoConfig *)0)->env), 0,
     "environment name (`nevo envs` lists them)"},
    {"dataset", T_STRING, OFF(dataset), MAY_BE_EMPTY, 0, NULL, sizeof(((NevoConfig *)0)->dataset), 0,
     "supervised data instead of an env: fashion-mnist (Debian's dataset-fashion-mnist), or a directory "
     "holding IDX files train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-... (each may be .gz)"},
    {"algo", T_STRING, OFF(algo), 0, 0, NULL, sizeof(((NevoConfig *)0)->algo), 0,
     "training algorithm (listed above; checked by the algorithm registry)"},
    {"seed", T_U64, OFF(seed), 0, 9.2e18, NULL, 0, 0, "master seed of every random stream (0 .. 2^63-1)"},
    {"population", T_INT, OFF(population), 1, 1e7, NULL, 0, 0, "individuals evaluated per generation"},
    {"generations", T_INT, OFF(generations), 1, 1e8, NULL, 0, 0, "generations to run"},
    {"max_frames", T_I64, OFF(max_frames), 0, 1e15, NULL, 0, 0,
     "frame budget: stop after the generation that brings the run's frames to it (0 = none)"},
    {"max_wall_s", T_DOUBLE, OFF(max_wall_s), 0, BIG, NULL, 0, 0,
     "wall-time budget in seconds: stop after the generation that brings the run's wall_s (resumes included) "
     "to it (0 = none); how many generations run then depends on the machine, their results do not"},
    {"threads", T_INT, OFF(threads), 0, 4096, NULL, 0, 0, "worker threads (0 = every CPU this process may run on); never changes results"},
    {"backend", T_STRING, OFF(backend), 0, 0, "cpu|cuda", sizeof(((NevoConfig *)0)->backend), 0,
     "where the networks are computed: cpu, or cuda (an NVIDIA GPU, in a `make CUDA=1` build: env episodes, and "
     "the actor-learners' acting forward, LSTM policies included; datasets stay on the CPU); both give the same bits"},
    {"episodes", T_INT, OFF(episodes), 1, 1e6, NULL, 0, 0, "episodes per individual for its fitness"},
    {"max_episode_steps", T_INT, OFF(max_episode_steps), 0, 1e9, NULL, 0, 0,
     "episode cap during training (0 = the environment's own time limit)"},
    {"eval_episodes", T_INT, OFF(eval_episodes), 1, 1e7, NULL, 0, 0,
     "episodes of the final evaluation of the best policy"},
    {"checkpoint_every", T_INT, OFF(checkpoint_every), 1, 1e8, NULL, 0, 0,
     "generations between checkpoints"},
    {"noise_table_floats", T_I64, OFF(noise_table_floats), 0, 268435456, NULL, 0, 0,
     "shared noise table size in floats (0 = automatic: 64 x parameters, 2^20..2^28)"},
    {"policy.hidden", T_INT_LIST, OFF(policy.hidden), 1, 65536, NULL, NEVO_MAX_LAYERS,
     OFF(policy.n_hidden), "units of each hidden dense layer, e.g. [64, 64]"},
    {"policy.conv_filters", T_INT_LIST, OFF(policy.conv_filters), 1, 4096, NULL, NEVO_MAX_LAYERS,
     OFF(policy.n_conv), "filters of each conv layer (image observations), e.g. [16]"},
    {"policy.conv_kernels", T_INT_LIST, OFF(policy.conv_kernels), 1, 15, NULL, NEVO_MAX_LAYERS,
     OFF(policy.n_conv_kernels), "kernel size of each conv layer (default 3 each), e.g. [3]"},
    {"policy.conv_strides", T_INT_LIST, OFF(policy.conv_strides), 1, 8, NULL, NEVO_MAX_LAYERS,
     OFF(policy.n_conv_strides), "stride of each conv layer (default 1 each), e.g. [1]"},
    {"policy.lstm", T_INT, OFF(policy.lstm), 0, 4096, NULL, 0, 0,
     "units of an LSTM layer after the hidden layers, before the output layer (0 = none: a feed-forward "
     "policy); its state is zeroed as each episode starts"},
    {"policy.value_head", T_BOOL, OFF(policy.value_head), 0, 1, NULL, 0, 0,
     "one more output after the action outputs, the state's value V(x) (actor-critic learners: algo vtrace)"},
    {"policy.activation", T_STRING, OFF(policy.activation), 0, 0, "tanh|relu",
     sizeof(((NevoConfig *)0)->policy.activation), 0, "hidden-layer nonlinearity"},
    {"policy.init", T_STRING, OFF(policy.init), 0, 0, "scaled|normc",
     sizeof(((NevoConfig *)0)->policy.init), 0,
     "weight init: scaled (N(0,1)/sqrt(fan_in), Uber GA) or normc (OpenAI ES)"},
    /* step sizes are > 0: at 0 the GA's children equal their parents, ES divides by its
     * sigma (NaN) and never moves with lr 0; below 1e-8 a float step is lost against
     * weights of order 1 */
    {"ga.sigma", T_DOUBLE, OFF(ga.sigma), 1e-8, 1e6, NULL, 0, 0, "mutation power (std of the noise added)"},
    {"ga.sigma_decay", T_DOUBLE, OFF(ga.sigma_decay), 1e-6, 1, NULL, 0, 0,
     "generation g mutates with max(ga.sigma_min, ga.sigma x ga.sigma_decay^g) (1 = a constant sigma)"},
    {"ga.sigma_min", T_DOUBLE, OFF(ga.sigma_min), 0, 1e6, NULL, 0, 0, "the floor of the decayed mutation power"},
    {"ga.shared_episodes", T_BOOL, OFF(ga.shared_episodes), 0, 1, NULL, 0, 0,
     "common random numbers: every individual of a generation plays the same episode seeds"},
    {"ga.truncation", T_INT, OFF(ga.truncation), 1, 1e7, NULL, 0, 0, "T: the top T become parents"},
    {"ga.elitism", T_BOOL, OFF(ga.elitism), 0, 1, NULL, 0, 0,
     "copy the elite unmodified into the next generation (paper) or only keep it as a parent (Uber GPU)"},
    {"ga.validation_candidates", T_INT, OFF(ga.validation_candidates), 1, 1000, NULL, 0, 0,
     "top individuals re-evaluated to choose the elite"},
    {"ga.validation_episodes", T_INT, OFF(ga.validation_episodes), 0, 1e6, NULL, 0, 0,
     "extra episodes per elite candidate (0 = choose by training fitness)"},
    {"ga.mutation", T_STRING, OFF(ga.mutation), 0, 0, "plain|sm-g-sum|sm-g-abs|sm-g-so|sm-r",
     sizeof(((NevoConfig *)0)->ga.mutation), 0,
     "plain Gaussian mutation, or a safe mutation scaled by the parent's output gradients (sm-g-*) or "
     "rescaled by a line search to an output change of ga.sigma (sm-r)"},
    {"ga.sm_states", T_INT, OFF(ga.sm_states), 1, 1e6, NULL, 0, 0,
     "safe mutations: states from the parent's own episodes behind its output gradients"},
    {"ga.rank", T_INT, OFF(ga.rank), 0, 64, NULL, 0, 0,
     "low-rank mutations (EGGROLL's perturbations, es.rank's): each weight matrix of a child moves by "
     "A B^T / sqrt(rank), biases by full noise; 0 = full-rank noise (Deep GA)"},
    {"ga.factored", T_BOOL, OFF(ga.factored), 0, 1, NULL, 0, 0,
     "with ga.rank: each child runs the factored forward, its parent's product x W shared by the parent's "
     "children plus its rank-r correction, instead of its own built network (feed-forward policies on an env)"},
    {"es.sigma", T_DOUBLE, OFF(es.sigma), 1e-8, 1e6, NULL, 0, 0, "perturbation std"},
    {"es.sigma_decay", T_DOUBLE, OFF(es.sigma_decay), 1e-6, 1, NULL, 0, 0,
     "generation g perturbs with max(es.sigma_min, es.sigma x es.sigma_decay^g) (1 = a constant sigma)"},
    {"es.sigma_min", T_DOUBLE, OFF(es.sigma_min), 0, 1e6, NULL, 0, 0, "the floor of the decayed perturbation std"},
    {"es.optimizer", T_STRING, OFF(es.optimizer), 0, 0, "adam|sgd", sizeof(((NevoConfig *)0)->es.optimizer),
     0, "update rule"},
    {"es.lr", T_DOUBLE, OFF(es.lr), 1e-8, 1e6, NULL, 0, 0, "step size"},
    {"es.l2", T_DOUBLE, OFF(es.l2), 0, 1e6, NULL, 0, 0, "L2 weight decay coefficient"},
    {"es.beta1", T_DOUBLE, OFF(es.beta1), 0, 0.999999, NULL, 0, 0, "Adam beta1"},
    {"es.beta2", T_DOUBLE, OFF(es.beta2), 0, 0.999999999, NULL, 0, 0, "Adam beta2"},
    {"es.momentum", T_DOUBLE, OFF(es.momentum), 0, 0.999999, NULL, 0, 0, "SGD momentum"},
    {"es.obs_norm", T_BOOL, OFF(es.obs_norm), 0, 1, NULL, 0, 0, "normalise observations by running mean/std (algo es)"},
    {"es.obs_norm_prob", T_DOUBLE, OFF(es.obs_norm_prob), 0, 1, NULL, 0, 0,
     "fraction of rollouts that update the observation statistics"},
    {"es.shaping", T_STRING, OFF(es.shaping), 0, 0, "ranks|reward_std", sizeof(((NevoConfig *)0)->es.shaping), 0,
     "fitness shaping: centred ranks (OpenAI ES) or rewards divided by their std (ARS; the NS family mixes reward and novelty z-scores)"},
    {"es.top_directions", T_INT, OFF(es.top_directions), 0, 1e7, NULL, 0, 0,
     "ARS: step along only the b perturbation pairs with the best max(r+, r-) (0 = all pairs)"},
    {"es.reward_shift", T_DOUBLE, OFF(es.reward_shift), 0, 1e6, NULL, 0, 0,
     "ARS: subtracted per step from the perturbed rollouts' returns used for the update (e.g. 1, the "
     "alive bonus); reports and evaluations use true returns"},
    {"es.rank", T_INT, OFF(es.rank), 0, 64, NULL, 0, 0,
     "low-rank perturbations (EGGROLL, Sarkar et al. 2025): each weight matrix of a member moves by "
     "A B^T / sqrt(rank), biases by full noise; 0 = full-rank noise (OpenAI ES)"},
    {"es.factored", T_BOOL, OFF(es.factored), 0, 1, NULL, 0, 0,
     "with es.rank: each member runs EGGROLL's factored forward, the centre's product x W shared by all plus "
     "its rank-r correction (x A) B^T, instead of its own built network (the same networks, summed in "
     "another order; feed-forward policies on an env)"},
    {"es.grad_cosine", T_BOOL, OFF(es.grad_cosine), 0, 1, NULL, 0, 0,
     "on a dataset: report the cosine between each step's direction and the true gradient of the fitness on "
     "the same batches (metrics' grad_cosine)"},
    {"es.center_episodes", T_INT, OFF(es.center_episodes), 0, 1e6, NULL, 0, 0,
     "episodes evaluating the current mean parameters each generation (reporting; for the NS-ES "
     "family also the agent's behaviour)"},
    {"optim.name", T_STRING, OFF(optim.name), 0, 0, "sgd|adam|rmsprop", sizeof(((NevoConfig *)0)->optim.name),
     0, "gradient optimiser (algo sgd)"},
    {"optim.lr", T_DOUBLE, OFF(optim.lr), 1e-12, 1e6, NULL, 0, 0, "learning rate"},
    {"optim.momentum", T_DOUBLE, OFF(optim.momentum), 0, 0.999999, NULL, 0, 0, "sgd and rmsprop momentum"},
    {"optim.beta1", T_DOUBLE, OFF(optim.beta1), 0, 0.999999, NULL, 0, 0, "Adam beta1"},
    {"optim.beta2", T_DOUBLE, OFF(optim.beta2), 0, 0.999999999, NULL, 0, 0, "Adam beta2"},
    {"optim.decay", T_DOUBLE, OFF(optim.decay), 0, 0.999999999, NULL, 0, 0, "RMSProp decay of the mean square"},
    {"optim.eps", T_DOUBLE, OFF(optim.eps), 1e-12, 10, NULL, 0, 0, "Adam and RMSProp denominator epsilon"},
    {"optim.weight_decay", T_DOUBLE, OFF(optim.weight_decay), 0, 1e6, NULL, 0, 0,
     "L2 coefficient added to the gradient"},
    {"optim.lr_decay", T_STRING, OFF(optim.lr_decay), 0, 0, "none|linear", sizeof(((NevoConfig *)0)->optim.lr_decay),
     0, "algo vtrace and r2d2: none, or linear (the learning rate falls linearly to 0 over the run: its max_frames, "
     "else its generations, set at each generation's start)"},
    {"optim.clip_norm", T_DOUBLE, OFF(optim.clip_norm), 0, 1e12, NULL, 0, 0,
     "clip the gradient to this global L2 norm (0 = no clipping)"},
    {"rl.mode", T_STRING, OFF(rl.mode), 0, 0, "sync|async", sizeof(((NevoConfig *)0)->rl.mode), 0,
     "algo vtrace and r2d2: sync (a fixed schedule of actor steps and learner updates: bit-identical across threads "
     "and resume) or async (actors, batched inference and learner concurrently: faster, not reproducible)"},
    {"rl.envs", T_INT, OFF(rl.envs), 1, 1e6, NULL, 0, 0, "environment instances the actors step"},
    {"rl.actors", T_INT, OFF(rl.actors), 0, 4096, NULL, 0, 0,
     "async: actor threads, each owning envs / actors instances (0 = a quarter of the CPUs, at least 1)"},
    {"rl.unroll", T_INT, OFF(rl.unroll), 1, 100000, NULL, 0, 0, "T: steps of each trajectory the learner takes"},
    {"rl.batch", T_INT, OFF(rl.batch), 0, 1e6, NULL, 0, 0,
     "trajectories per learner step (0 = rl.envs; sync mode trains on every env's each step)"},
    {"rl.steps_per_generation", T_INT, OFF(rl.steps_per_generation), 1, 1e9, NULL, 0, 0,
     "learner steps per generation (one metrics line, the unit of generations and checkpoint_every)"},
    {"rl.discount", T_DOUBLE, OFF(rl.discount), 0, 1, NULL, 0, 0, "gamma"},
    {"rl.rho_bar", T_DOUBLE, OFF(rl.rho_bar), 0, 1e6, NULL, 0, 0, "V-trace: truncation of the importance weights rho"},
    {"rl.c_bar", T_DOUBLE, OFF(rl.c_bar), 0, 1e6, NULL, 0, 0, "V-trace: truncation of the traces c"},
    {"rl.baseline_cost", T_DOUBLE, OFF(rl.baseline_cost), 0, 1e6, NULL, 0, 0, "weight of the value loss"},
    {"rl.entropy_cost", T_DOUBLE, OFF(rl.entropy_cost), 0, 1e6, NULL, 0, 0, "weight of the entropy bonus"},
    {"rl.reward_clip", T_DOUBLE, OFF(rl.reward_clip), 0, 1e12, NULL, 0, 0, "rewards clipped to +-this (0 = none)"},
    {"rl.queue", T_INT, OFF(rl.queue), 1, 1e6, NULL, 0, 0, "async: trajectories the queue to the learner holds"},
    {"rl.batch_wait_us", T_INT, OFF(rl.batch_wait_us), 0, 1e7, NULL, 0, 0,
     "async: microseconds the inference server waits for more observations before running a batch"},
    {"rl.burn_in", T_INT, OFF(rl.burn_in), 0, 100000, NULL, 0, 0,
     "algo r2d2: steps before each replayed sequence that only warm the LSTM state (no loss on them)"},
    {"rl.n_step", T_INT, OFF(rl.n_step), 1, 1000, NULL, 0, 0, "algo r2d2: n of the n-step double-Q targets"},
    {"rl.period", T_INT, OFF(rl.period), 0, 100000, NULL, 0, 0,
     "algo r2d2: steps every env takes per learner step; a sequence is cut every period steps, so adjacent "
     "ones overlap by burn_in + unroll - period (0 = half the unroll, R2D2's 40 of 80)"},
    {"rl.replay", T_INT, OFF(rl.replay), 1, 1e8, NULL, 0, 0, "algo r2d2: sequences the replay buffer holds"},
    {"rl.replay_start", T_INT, OFF(rl.replay_start), 1, 1e8, NULL, 0, 0,
     "algo r2d2: sequences in the buffer before the first update"},
    {"rl.target_period", T_INT, OFF(rl.target_period), 1, 1e9, NULL, 0, 0,
     "algo r2d2: learner updates between copies of the online network into the target network"},
    {"rl.priority_eta", T_DOUBLE, OFF(rl.priority_eta), 0, 1, NULL, 0, 0,
     "algo r2d2: a sequence's priority is eta max|delta| + (1 - eta) mean|delta|"},
    {"rl.priority_exponent", T_DOUBLE, OFF(rl.priority_exponent), 0, 10, NULL, 0, 0,
     "algo r2d2: sequences are sampled with probability proportional to priority^this (0 = uniform)"},
    {"rl.is_exponent", T_DOUBLE, OFF(rl.is_exponent), 0, 1, NULL, 0, 0,
     "algo r2d2: importance-sampling weights (N P(i))^-this, divided by the batch's largest"},
    {"rl.epsilon", T_DOUBLE, OFF(rl.epsilon), 0, 1, NULL, 0, 0,
     "algo r2d2: Ape-X exploration, env i of N acts at random with probability epsilon^(1 + alpha i / (N - 1))"},
    {"rl.epsilon_alpha", T_DOUBLE, OFF(rl.epsilon_alpha), 0, 100, NULL, 0, 0, "algo r2d2: alpha of rl.epsilon"},
    {"rl.rescale_eps", T_DOUBLE, OFF(rl.rescale_eps), 0, 1, NULL, 0, 0,
     "algo r2d2: epsilon of the value rescaling h(x) = sign(x)(sqrt(|x| + 1) - 1) + epsilon x"},
    {"rl.validation_every", T_INT, OFF(rl.validation_every), 0, 1e9, NULL, 0, 0,
     "algo vtrace and r2d2: every this many generations the learner's greedy policy plays rl.validation_episodes "
     "episodes (the same each time, counted in frames) and the best-scoring parameters are the run's policy "
     "(0 = none: the last parameters are)"},
    {"rl.validation_episodes", T_INT, OFF(rl.validation_episodes), 1, 1e6, NULL, 0, 0,
     "algo vtrace and r2d2: episodes of each validation"},
    {"data.train_samples", T_INT, OFF(data.train_samples), 0, 1e9, NULL, 0, 0,
     "train on the first N training samples (0 = all)"},
    {"data.test_samples", T_INT, OFF(data.test_samples), 0, 1e9, NULL, 0, 0,
     "test on the first N test samples (0 = all)"},
    {"data.batch", T_INT, OFF(data.batch), 1, 1e7, NULL, 0, 0, "algo sgd: mini-batch size"},
    {"data.fitness_batch", T_INT, OFF(data.fitness_batch), 0, 1e9, NULL, 0, 0,
     "evolution on a dataset: samples behind each generation's fitness, drawn per generation and the same "
     "for every member (0 = the whole training set: no-mini-batch ES)"},
    {"ns.k", T_INT, OFF(ns.k), 1, 64, NULL, 0, 0, "nearest neighbours in the novelty score"},
    {"ns.archive_add", T_INT, OFF(ns.archive_add), 0, 1e6, NULL, 0, 0,
     "GA-NS: random individuals added to the archive per generation"},
    {"ns.meta_population", T_INT, OFF(ns.meta_population), 1, 1000, NULL, 0, 0,
     "NS-ES family: number of agents M"},
    {"ns.weight", T_DOUBLE, OFF(ns.weight), 0, 1, NULL, 0, 0, "NSRA-ES: initial reward weight w"},
    {"ns.weight_delta", T_DOUBLE, OFF(ns.weight_delta), 0, 1, NULL, 0, 0, "NSRA-ES: step of the reward weight"},
    {"ns.patience", T_INT, OFF(ns.patience), 1, 1e6, NULL, 0, 0,
     "NSRA-ES: generations without improvement before the reward weight decreases"},
};

#define N_KEYS ((int)(sizeof schema / sizeof schema[0]))

void nevo_config_defaults(NevoConfig *cfg) {
    memset(cfg, 0, sizeof *cfg);
    strcpy(cfg->env, "CartPole-v1");
    strcpy(cfg->algo, "ga");
    strcpy(cfg->backend, "cpu");
    cfg->seed = 1;
    cfg->population = 100;
    cfg->generations = 50;
    cfg->threads = 0;
    cfg->episodes = 1;
    cfg->max_episode_steps = 0;
    cfg->eval_episodes = 100;
    cfg->checkpoint_every = 1;
    cfg->policy.n_hidden = 2;
    cfg->policy.hidden[0] = 64;
    cfg->policy.hidden[1] = 64;
    strcpy(cfg->policy.activation, "tanh");
    strcpy(cfg->policy.init, "scaled");
    cfg->ga.sigma = 0.002;
    cfg->ga.truncation = 20;
    cfg->ga.sigma_decay = 1.0;
    cfg->es.sigma_decay = 1.0;
    cfg->ga.elitism = 1;
    cfg->ga.validation_candidates = 10;
    cfg->ga.validation_episodes = 30;
    strcpy(cfg->ga.mutation, "plain");
    cfg->ga.sm_states = 100;
    cfg->es.sigma = 0.02;
    strcpy(cfg->es.optimizer, "adam");
    cfg->es.lr = 0.01;
    cfg->es.l2 = 0.005;
    cfg->es.beta1 = 0.9;
    cfg->es.beta2 = 0.999;
    cfg->es.momentum = 0.9;
    cfg->es.obs_norm = 1;
    cfg->es.obs_norm_prob = 0.01;
    cfg->es.center_episodes = 10;
    strcpy(cfg->es.shaping, "ranks");
    cfg->es.top_directions = 0;
    cfg->ns.k = 10;
    cfg->ns.archive_add = 5;
    cfg->ns.meta_population = 5;
    cfg->ns.weight = 1.0;
    cfg->ns.weight_delta = 0.05;
    cfg->ns.patience = 10;
    strcpy(cfg->optim.name, "adam");
    strcpy(cfg->optim.lr_decay, "none");
    cfg->optim.lr = 1e-3;
    cfg->optim.momentum = 0.9;
    cfg->optim.beta1 = 0.9;
    cfg->optim.beta2 = 0.999;
    cfg->optim.decay = 0.99;
    cfg->optim.eps = 1e-8;
    cfg->data.batch = 64;
    strcpy(cfg->rl.mode, "sync");
    cfg->rl.envs = 32;
    cfg->rl.unroll = 20;
    cfg->rl.steps_per_generation = 50;
    cfg->rl.discount = 0.99;
    cfg->rl.rho_bar = 1.0;
    cfg->rl.c_bar = 1.0;
    cfg->rl.baseline_cost = 0.5;
    cfg->rl.entropy_cost = 0.01;
    cfg->rl.queue = 64;
    cfg->rl.batch_wait_us = 200;
    cfg->rl.burn_in = 10;
    cfg->rl.n_step = 5;
    cfg->rl.replay = 2000;
    cfg->rl.replay_start = 200;
    cfg->rl.target_period = 500;
    cfg->rl.priority_eta = 0.9;
    cfg->rl.priority_exponent = 0.9;
    cfg->rl.is_exponent = 0.6;
    cfg->rl.epsilon = 0.4;
    cfg->rl.epsilon_alpha = 7.0;
    cfg->rl.rescale_eps = 1e-3;
    cfg->rl.validation_episodes = 10;
}

static const Key *find_key(const char *name) {
    for (int i = 0; i < N_KEYS; i++)
        if (strcmp(schema[i].name, name) == 0) return &schema[i];
    return NULL;
}

/* True when some schema key lives under `prefix.` (so `prefix` is an object). */
static int is_section(const char *prefix) {
    size_t n = strlen(prefix);
    for (int i = 0; i < N_KEYS; i++)
        if (strncmp(schema[i].name, prefix, n) == 0 && schema[i].name[n] == '.') return 1;
    return 0;
}

static NevoStatus unknown_key(const char *name, const char *source, NevoError *err) {
    const char *names[N_KEYS + 1];
    for (int i = 0; i < N_KEYS; i++) names[i] = schema[i].name;
    names[N_KEYS] = "env_options";
    const char *best = nevo_closest(name, names, N_KEYS + 1);
    if (best)
        return nevo_error(err, NEVO_ERR_INVALID, "%s: unknown key '%s'; did you mean '%s'?", source,
                          name, best);
    return nevo_error(err, NEVO_ERR_INVALID,
                      "%s: unknown key '%s' (`nevo train --help` lists the valid keys)", source, name);
}

static const char *json_type_name(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "a list";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "a value";
}

/* source: where the value came from ("configs/x.json: "), NULL for none. */
static NevoStatus check_range(const Key *k, double v, const char *source, const char *what,
                              NevoError *err) {
    const char *sep = source ? ": " : "";
    if (!source) source = "";
    if (!isfinite(v))
        return nevo_error(err, NEVO_ERR_INVALID, "%s%s%s%s must be a finite number", source, sep, k->name, what);
    if (v < k->min || v > k->max) {
        if (k->max >= BIG || k->max > 1e15)
            return nevo_error(err, NEVO_ERR_INVALID, "%s%s%s%s = %g is out of range: it must be >= %g",
                              source, sep, k->name, what, v, k->min);
        return nevo_error(err, NEVO_ERR_INVALID,
                          "%s%s%s%s = %g is out of range: it must be between %g and %g", source, sep,
                          k->name, what, v, k->min, k->max);
    }
    /* 1e-310 and the like: no key means anything by so small a number, and arithmetic
     * on subnormals is slow and loses precision */
    if (fpclassify(v) == FP_SUBNORMAL)
        return nevo_error(err, NEVO_ERR_INVALID,
                          "%s%s%s%s = %g is a subnormal number, too small to compute with; use 0 or a value of "
                          "at least 2.3e-308",
                          source, sep, k->name, what, v);
    return NEVO_OK;
}

static NevoStatus set_value(NevoConfig *cfg, const Key *k, const json_t *v, const char *source,
                            NevoError *err) {
    char *base = (char *)cfg;
    switch (k->type) {
    case T_INT:
    case T_I64:
    case T_U64: {
        if (!json_is_integer(v))
            return nevo_error(err, NEVO_ERR_INVALID, "%s: %s must be an integer, got %s", source,
                              k->name, json_type_name(v));
        json_int_t x = json_integer_value(v);
        if (k->type == T_U64) {
            if (x < 0)
                return nevo_error(err, NEVO_ERR_INVALID, "%s: %s must be >= 0, got %lld", source,
                                  k->name, (long long)x);
            *(uint64_t *)(base + k->offset) = (uint64_t)x;
            return NEVO_OK;
        }
        NevoStatus st = check_range(k, (double)x, source, "", err);
        if (st) return st;
        if (k->type == T_I64) *(long long *)(base + k->offset) = (long long)x;
        else *(int *)(base + k->offset) = (int)x;
        return NEVO_OK;
    }
    case T_DOUBLE: {
        if (!json_is_number(v))
            return nevo_error(err, NEVO_ERR_INVALID, "%s: %s must be a number, got %s", source,
                              k->name, json_type_name(v));
        double x = json_number_value(v);
        NevoStatus st = check_range(k, x, source, "", err);
        if (st) return st;
        *(double *)(base + k->offset) = x == 0.0 ? 0.0 : x; /* -0 is 0 */
        return NEVO_OK;
    }
    case T_BOOL:
        if (!json_is_boolean(v))
            return nevo_error(err, NEVO_ERR_INVALID, "%s: %s must be true or false, got %s", source,
                              k->name, json_type_name(v));
        *(int *)(base + k->offset) = json_is_true(v);
        return NEVO_OK;
    case T_STRING: {
        if (!json_is_string(v))
            return nevo_error(err, NEVO_ERR_INVALID, "%s: %s must be a string, got %s", source,
                              k->name, json_type_name(v));
        const char *s = json_string_value(v);
        if (k->choices) {
            char list[128];
            nevo_strlcpy(list, k->choices, sizeof list);
            int ok = 0;
            for (char *tok = strtok(list, "|"); tok; tok = strtok(NULL, "|"))
                if (strcmp(tok, s) == 0) ok = 1;
            if (!ok)
                return nevo_error(err, NEVO_ERR_INVALID, "%s: %s = '%s' is not one of %s", source,
                                  k->name, s, k->choices);
        }
        if (strlen(s) == 0 && k->min != MAY_BE_EMPTY)
            return nevo_error(err, NEVO_ERR_INVALID, "%s: %s must not be empty", source, k->name);
        if (nevo_strlcpy(base + k->offset, s, k->size) != 0)
            return nevo_error(err, NEVO_ERR_INVALID, "%s: %s = '%s' is too long (at most %zu characters)",
                              source, k->name, s, k->size - 1);
        return NEVO_OK;
    }
    case T_INT_LIST: {
        if (!json_is_array(v))
            return nevo_error(err, NEVO_ERR_INVALID, "%s: %s must be a list of integers, got %s",
                              source, k->name, json_type_name(v));
        size_t n = json_array_size(v);
        if (n > k->size)
            return nevo_error(err, NEVO_ERR_INVALID, "%s: %s has %zu entries, at most %zu allowed",
                              source, k->name, n, k->size);
        int vals[NEVO_MAX_LAYERS];
        for (size_t i = 0; i < n; i++) {
            json_t *e = json_array_get(v, i);
            if (!json_is_integer(e))
                return nevo_error(err, NEVO_ERR_INVALID, "%s: %s[%zu] must be an integer, got %s",
                                  source, k->name, i, json_type_name(e));
            char what[32];
            snprintf(what, sizeof what, "[%zu]", i);
            NevoStatus st = check_range(k, (double)json_integer_value(e), source, what, err);
            if (st) return st;
            vals[i] = (int)json_integer_value(e);
        }
        memcpy(base + k->offset, vals, sizeof(int) * n);
        *(int *)(base + k->count_offset) = (int)n;
        return NEVO_OK;
    }
    }
    return NEVO_OK;
}

static NevoStatus set_env_option(NevoConfig *cfg, const char *name, const json_t *v,
                                 const char *source, NevoError *err) {
    double x;
    if (json_is_boolean(v)) x = json_is_true(v) ? 1.0 : 0.0;
    else if (json_is_number(v)) x = json_number_value(v);
    else
        return nevo_error(err, NEVO_ERR_INVALID, "%s: env_options.%s must be a number or boolean, got %s",
                          source, name, json_type_name(v));
    if (!isfinite(x) || fpclassify(x) == FP_SUBNORMAL)
        return nevo_error(err, NEVO_ERR_INVALID, "%s: env_options.%s = %g must be a finite, normal number (or 0)",
                          source, name, x);
    if (x == 0.0) x = 0.0; /* -0 is 0 */
    if (name[0] == '\0')
        return nevo_error(err, NEVO_ERR_INVALID, "%s: env option names must not be empty", source);
    for (int i = 0; i < cfg->n_env_options; i++) {
        if (strcmp(cfg->env_options[i].key, name) == 0) {
            cfg->env_options[i].value = x;
            return NEVO_OK;
        }
    }
    if (cfg->n_env_options == NEVO_ENV_MAX_OPTIONS)
        return nevo_error(err, NEVO_ERR_INVALID, "%s: too many env_options (at most %d)", source,
                          NEVO_ENV_MAX_OPTIONS);
    NevoEnvOption *o = &cfg->env_options[cfg->n_env_options];
    if (nevo_strlcpy(o->key, name, sizeof o->key) != 0)
        return nevo_error(err, NEVO_ERR_INVALID, "%s: env option name '%s' is too long", source, name);
    o->value = x;
    cfg->n_env_options++;
    return NEVO_OK;
}

/* Sets the dotted key `name` to v: a schema key, an env option, or a section object
 * whose members are applied in turn. */
static NevoStatus apply(NevoConfig *cfg, const char *name, const json_t *v, const char *source,
                        NevoError *err) {
    if (strncmp(name, "env_options.", 12) == 0) return set_env_option(cfg, name + 12, v, source, err);
    if (strcmp(name, "env_options") == 0) {
        if (!json_is_object(v))
            return nevo_error(err, NEVO_ERR_INVALID, "%s: env_options must be an object, got %s",
                              source, json_type_name(v));
        const char *sub;
        json_t *sv;
        json_object_foreach((json_t *)v, sub, sv) {
            NevoStatus st = set_env_option(cfg, sub, sv, source, err);
            if (st) return st;
        }
        return NEVO_OK;
    }
    const Key *k = find_key(name);
    if (k) return set_value(cfg, k, v, source, err);
    if (is_section(name)) {
        if (!json_is_object(v))
            return nevo_error(err, NEVO_ERR_INVALID, "%s: %s must be an object, got %s", source, name,
                              json_type_name(v));
        const char *sub;
        json_t *sv;
        json_object_foreach((json_t *)v, sub, sv) {
            char full[160];
            snprintf(full, sizeof full, "%s.%s", name, sub);
            NevoStatus st = apply(cfg, full, sv, source, err);
            if (st) return st;
        }
        return NEVO_OK;
    }
    return unknown_key(name, source, err);
}

NevoStatus nevo_config_apply_json(NevoConfig *cfg, const char *json_text, const char *source,
                                  NevoError *err) {
    json_error_t jerr;
    json_t *root = json_loads(json_text, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return nevo_error(err, NEVO_ERR_INVALID, "%s:%d:%d: malformed JSON: %s", source, jerr.line,
                          jerr.column, jerr.text);
    if (!json_is_object(root)) {
        json_decref(root);
        return nevo_error(err, NEVO_ERR_INVALID, "%s: the config must be a JSON object {...}", source);
    }
    NevoStatus st = NEVO_OK;
    const char *name;
    json_t *v;
    json_object_foreach(root, name, v) {
        if (name[0] == '_') continue; /* "_comment" keys document a config */
        st = apply(cfg, name, v, source, err);
        if (st) break;
    }
    json_decref(root);
    return st;
}

NevoStatus nevo_config_load(NevoConfig *cfg, const char *path, NevoError *err) {
    nevo_config_defaults(cfg);
    FILE *f = nevo_open_regular(path, err);
    if (!f) {
        nevo_error_prefix(err, "config: "); /* "config: cannot read PATH: why" */
        return NEVO_ERR_IO;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (n < 0 || n > (64 << 20)) {
        fclose(f);
        return nevo_error(err, NEVO_ERR_IO, "cannot read config %s: too large", path);
    }
    char *text = nevo_alloc((size_t)n + 1);
    size_t got = fread(text, 1, (size_t)n, f);
    fclose(f);
    text[got] = '\0';
    if (strlen(text) != got) { /* jansson would stop at the NUL and never see what follows */
        size_t at = strlen(text);
        free(text);
        return nevo_error(err, NEVO_ERR_INVALID, "config %s: a NUL byte at offset %zu", path, at);
    }
    NevoStatus st = nevo_config_apply_json(cfg, text, path, err);
    free(text);
    return st;
}

NevoStatus nevo_config_override(NevoConfig *cfg, const char *assignment, NevoError *err) {
    const char *eq = strchr(assignment, '=');
    if (!eq || eq == assignment)
        return nevo_error(err, NEVO_ERR_INVALID, "override '%s' is not of the form key=value",
                          assignment);
    char key[160];
    size_t klen = (size_t)(eq - assignment);
    if (klen >= sizeof key) return nevo_error(err, NEVO_ERR_INVALID, "override key too long");
    memcpy(key, assignment, klen);
    key[klen] = '\0';
    const char *text = eq + 1;
    json_error_t jerr;
    json_t *v = json_loads(text, JSON_DECODE_ANY, &jerr);
    if (!v) v = json_string(text); /* a bare word: ga, CartPole-v1, ... */
    char source[200];
    snprintf(source, sizeof source, "command-line override '%s'", assignment);
    if (!v) /* json_string refuses what is not UTF-8 */
        return nevo_error(err, NEVO_ERR_INVALID, "%s: the value is not valid UTF-8 text", source);
    NevoStatus st = apply(cfg, key, v, source, err);
    json_decref(v);
    return st;
}


/* A key's value in cfg against the schema, as set_value checks it on the way in: for a
 * config that did not come through set_value (built in code, or read back from a
 * file, where any byte may have been changed). */
static NevoStatus check_stored(const NevoConfig *cfg, const Key *k, NevoError *err) {
    const char *base = (const char *)cfg;
    switch (k->type) {
    case T_INT: return check_range(k, *(const int *)(base + k->offset), NULL, "", err);
    case T_I64: return check_range(k, (double)*(const long long *)(base + k->offset), NULL, "", err);
    case T_U64: return NEVO_OK; /* seed: checked below */
    case T_DOUBLE: return check_range(k, *(const double *)(base + k->offset), NULL, "", err);
    case T_BOOL: {
        int b = *(const int *)(base + k->offset);
        if (b != 0 && b != 1) return nevo_error(err, NEVO_ERR_INVALID, "%s must be true or false", k->name);
        return NEVO_OK;
    }
    case T_STRING: {
        const char *s = base + k->offset;
        if (!memchr(s, '\0', k->size) || (s[0] == '\0' && k->min != MAY_BE_EMPTY))
            return nevo_error(err, NEVO_ERR_INVALID, "%s must be a non-empty string of at most %zu characters",
                              k->name, k->size - 1);
        if (!k->choices) return NEVO_OK;
        char list[128];
        nevo_strlcpy(list, k->choices, sizeof list);
        for (char *save = NULL, *tok = strtok_r(list, "|", &save); tok; tok = strtok_r(NULL, "|", &save))
            if (strcmp(tok, s) == 0) return NEVO_OK;
        return nevo_error(err, NEVO_ERR_INVALID, "%s = '%s' is not one of %s", k->name, s, k->choices);
    }
    case T_INT_LIST: {
        int n = *(const int *)(base + k->count_offset);
        if (n < 0 || (size_t)n > k->size)
            return nevo_error(err, NEVO_ERR_INVALID, "%s has %d entries, at most %zu allowed", k->name, n, k->size);
        for (int i = 0; i < n; i++) {
            char what[32];
            snprintf(what, sizeof what, "[%d]", i);
            NevoStatus st = check_range(k, ((const int *)(base + k->offset))[i], NULL, what, err);
            if (st) return st;
        }
        return NEVO_OK;
    }
    }
    return NEVO_OK;
}

NevoStatus nevo_config_check(const NevoConfig *cfg, NevoError *err) {
    for (int i = 0; i < N_KEYS; i++) {
        NevoStatus st = check_stored(cfg, &schema[i], err);
        if (st) return st;
    }
    if (cfg->n_env_options < 0 || cfg->n_env_options > NEVO_ENV_MAX_OPTIONS)
        return nevo_error(err, NEVO_ERR_INVALID, "%d env_options: at most %d allowed", cfg->n_env_options,
                          NEVO_ENV_MAX_OPTIONS);
    for (int i = 0; i < cfg->n_env_options; i++) {
        const NevoEnvOption *o = &cfg->env_options[i];
        if (!memchr(o->key, '\0', sizeof o->key) || o->key[0] == '\0')
            return nevo_error(err, NEVO_ERR_INVALID, "env option %d has an empty or unterminated name", i);
        if (!isfinite(o->value) || fpclassify(o->value) == FP_SUBNORMAL)
            return nevo_error(err, NEVO_ERR_INVALID, "env_options.%s = %g must be a finite, normal number (or 0)",
                              o->key, o->value);
        for (int j = 0; j < i; j++)
            if (strcmp(cfg->env_options[j].key, o->key) == 0)
                return nevo_error(err, NEVO_ERR_INVALID, "env_options.%s is given twice", o->key);
    }
    if (cfg->seed > (uint64_t)INT64_MAX)
        return nevo_error(err, NEVO_ERR_INVALID, "seed must be below 2^63 (configs store it as a JSON integer)");
    const NevoPolicyConfig *p = &cfg->policy;
    if ((p->n_conv_kernels && p->n_conv_kernels != p->n_conv) || (p->n_conv_strides && p->n_conv_strides != p->n_conv))
        return nevo_error(err, NEVO_ERR_INVALID,
                          "policy.conv_kernels (%d entries) and policy.conv_strides (%d) must be empty or have one "
                          "entry per conv layer of policy.conv_filters (%d)",
                          p->n_conv_kernels, p->n_conv_strides, p->n_conv);
    return NEVO_OK;
}

/* The memory limit in bytes: NEVO_MAX_MEMORY_MB, else the machine's physical memory
 * (HUGE_VAL where neither is known). */
static NevoStatus memory_limit(double *limit, const char **what, NevoError *err) {
    const char *env = getenv("NEVO_MAX_MEMORY_MB");
    if (env && *env) {
        char *end;
        errno = 0;
        unsigned long long mb = strtoull(env, &end, 10);
        if (*end || errno || env[0] == '-' || mb == 0)
            return nevo_error(err, NEVO_ERR_INVALID, "NEVO_MAX_MEMORY_MB='%s' must be a positive whole number of MiB",
                              env);
        *limit = (double)mb * 1048576.0;
        *what = "NEVO_MAX_MEMORY_MB";
        return NEVO_OK;
    }
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    *limit = pages > 0 && page > 0 ? (double)pages * (double)page : HUGE_VAL;
    *what = "this machine's memory; NEVO_MAX_MEMORY_MB sets another limit";
    return NEVO_OK;
}

NevoStatus nevo_config_check_params(size_t nparams, NevoError *err) {
    if (nparams >= NEVO_NOISE_MAX_FLOATS)
        return nevo_error(err, NEVO_ERR_INVALID,
                          "the network has %zu parameters; nevo trains at most %zu (policy.hidden, "
                          "policy.conv_filters)",
                          nparams, (size_t)NEVO_NOISE_MAX_FLOATS - 1);
    return NEVO_OK;
}

NevoStatus nevo_config_memory_limit(double need, const char *what_needs, NevoError *err) {
    double limit = HUGE_VAL;
    const char *what = "";
    NevoStatus st = memory_limit(&limit, &what, err);
    if (st) return st;
    if (need > limit)
        return nevo_error(err, NEVO_ERR_INVALID, "the run would need about %.3g GiB (%s), more than the %.3g GiB limit (%s)",
                          need / 1073741824.0, what_needs, limit / 1073741824.0, what);
    return NEVO_OK;
}

static json_t *key_to_json(const NevoConfig *cfg, const Key *k) {
    const char *base = (const char *)cfg;
    switch (k->type) {
    case T_INT: return json_integer(*(const int *)(base + k->offset));
    case T_I64: return json_integer((json_int_t) * (const long long *)(base + k->offset));
    case T_U64: return json_integer((json_int_t) * (const uint64_t *)(base + k->offset));
    case T_DOUBLE: return json_real(*(const double *)(base + k->offset));
    case T_BOOL: return json_boolean(*(const int *)(base + k->offset));
    case T_STRING: return json_string(base + k->offset);
    case T_INT_LIST: {
        json_t *a = json_array();
        int n = *(const int *)(base + k->count_offset);
        for (int i = 0; i < n; i++) json_array_append_new(a, json_integer(((const int *)(base + k->offset))[i]));
        return a;
    }
    }
    return json_null();
}

char *nevo_config_to_json(const NevoConfig *cfg) {
    json_t *root = json_object();
    for (int i = 0; i < N_KEYS; i++) {
        const Key *k = &schema[i];
        const char *dot = strchr(k->name, '.');
        if (!dot) {
            json_object_set_new(root, k->name, key_to_json(cfg, k));
            continue;
        }
        char section[32];
        snprintf(section, sizeof section, "%.*s", (int)(dot - k->name), k->name);
        json_t *obj = json_object_get(root, section);
        if (!obj) {
            obj = json_object();
            json_object_set_new(root, section, obj);
        }
        json_object_set_new(obj, dot + 1, key_to_json(cfg, k));
    }
    json_t *opts = json_object();
    for (int i = 0; i < cfg->n_env_options; i++)
        json_object_set_new(opts, cfg->env_options[i].key, json_real(cfg->env_options[i].value));
    json_object_set_new(root, "env_options", opts);
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    json_decref(root);
    return text;
}

void nevo_config_print_schema(void *file) {
    FILE *f = file;
    NevoConfig d;
    nevo_config_defaults(&d);
    for (int i = 0; i < N_KEYS; i++) {
        json_t *v = key_to_json(&d, &schema[i]);
        char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
        if (schema[i].type == T_DOUBLE) { /* the shortest text that reads back as the value: 0.99, not 0.98999999999999999 */
            double x = json_real_value(v);
            char buf[40];
            for (int digits = 1; digits <= 17; digits++) {
                snprintf(buf, sizeof buf, "%.*g", digits, x);
                if (strtod(buf, NULL) == x) break;
            }
            if (!strpbrk(buf, ".eninf")) strcat(buf, ".0");
            free(text);
            text = strdup(buf);
        }
        fprintf(f, "  %-26s %-10s %s (default %s)\n", schema[i].name,
                schema[i].type == T_INT_LIST ? "int list"
                : schema[i].type == T_STRING ? "string"
                : schema[i].type == T_BOOL   ? "bool"
                : schema[i].type == T_DOUBLE ? "number"
                                             : "integer",
                schema[i].help, text);
        free(text);
        json_decref(v);
    }
    fprintf(f, "  %-26s %-10s %s\n", "env_options.NAME", "number", "an environment's own option (e.g. sticky_prob)");
}
