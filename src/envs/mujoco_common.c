/* The MuJoCo env layer every robot shares: finding and loading the model, MuJoCo's
 * message handlers, instance lifetime, reset noise, the frame-skip step, full state
 * and the observation helpers (see mujoco_common.h for the rules). */
#include "envs/mujoco_common.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/strutil.h"
#include "nevo/io.h"

const char *const nevo_mj_options[] = {"frame_skip", "reset_noise_scale", NULL};
const char *const nevo_mj_health_options[] = {"frame_skip", "reset_noise_scale",
                                              "terminate_when_unhealthy", NULL};

/* mj_loadXML in MuJoCo 2.2 is not documented as thread-safe, and the handler globals
 * are set here too: both happen under this lock. */
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;

/* Warnings come from simulation trouble (a diverged state MuJoCo reset, a full contact
 * buffer); a few on stderr tell the user without flooding a long run. */
#define MAX_WARNINGS_SHOWN 3
static atomic_int n_warnings;

static void on_warning(const char *msg) {
    int k = atomic_fetch_add(&n_warnings, 1);
    if (k < MAX_WARNINGS_SHOWN)
        fprintf(stderr, "nevo: MuJoCo warning: %s%s\n", msg,
                k == MAX_WARNINGS_SHOWN - 1 ? " (further MuJoCo warnings not shown)" : "");
}

/* MuJoCo errors are broken invariants (out of its preallocated memory, ...): report and
 * abort, as nevo_fatal does, instead of the default's log file and wait for Enter. */
static void on_error(const char *msg) {
    fflush(stdout);
    fprintf(stderr, "nevo: MuJoCo error: %s\n", msg);
    abort();
}

static bool readable(const char *path) { return access(path, R_OK) == 0; }

/* Where the models are looked for after $NEVO_MODELS and ./models/mujoco: an installed
 * library's data directory (`make install` builds this file with
 * NEVO_MODELS_INSTALL_DIR), then the checkout it was built from (NEVO_MODELS_DIR). */
static const char *const baked_dirs[] = {
#ifdef NEVO_MODELS_INSTALL_DIR
    NEVO_MODELS_INSTALL_DIR,
#endif
#ifdef NEVO_MODELS_DIR
    NEVO_MODELS_DIR,
#endif
    NULL,
};

/* Resolves the model file: $NEVO_MODELS if set (and only there), else models/mujoco
 * under the current directory, else the directories baked in at build time, in order. */
static NevoStatus find_model(const char *name, const char *file, char *path, size_t size,
                             NevoError *err) {
    const char *dir = getenv("NEVO_MODELS");
    if (dir && *dir) {
        snprintf(path, size, "%s/%s", dir, file);
        if (readable(path)) return NEVO_OK;
        return nevo_error(err, NEVO_ERR_IO,
                          "%s: model file %s not found (NEVO_MODELS=%s); set NEVO_MODELS to "
                          "the directory holding nevo's models/mujoco files",
                          name, path, dir);
    }
    snprintf(path, size, "models/mujoco/%s", file);
    if (readable(path)) return NEVO_OK;
    char tried[512] = "";
    for (int i = 0; baked_dirs[i]; i++) {
        snprintf(path, size, "%s/%s", baked_dirs[i], file);
        if (readable(path)) return NEVO_OK;
        size_t used = strlen(tried);
        snprintf(tried + used, sizeof tried - used, "%s%s", i ? ", " : " nor in ", baked_dirs[i]);
    }
    return nevo_error(err, NEVO_ERR_IO,
                      "%s: model file %s not found in models/mujoco (under the current "
                      "directory)%s; set NEVO_MODELS to the directory holding nevo's "
                      "models/mujoco files",
                      name, file, tried);
}

/* --- the files a model names -------------------------------------------------------
 * MuJoCo opens the files a model names itself (includes, meshes, textures, height
 * fields, skins), and would wait forever on a FIFO. So before it loads a model, every
 * file the model names must be a regular file wherever MuJoCo could look for it. The
 * model's XML is read as MuJoCo's parser (tinyxml2) reads it, as far as attributes go:
 * comments, CDATA, declarations and closing tags skipped, C white space, quoted values
 * with the XML entities decoded. */

#define MJ_FILES 64   /* model files a model may be made of (itself and its includes) */
#define MJ_DIRS 8     /* directories named files are looked for in */
#define MJ_PATH 1100

typedef struct XmlAttr {
    const char *elem, *name; /* not terminated: elem_len and name_len bytes */
    int elem_len, name_len;
    char value[MJ_PATH];     /* decoded and terminated; "" where too long (MuJoCo's to refuse) */
} XmlAttr;

static int xml_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

static int xml_is(const char *s, int len, const char *word) {
    return len == (int)strlen(word) && strncmp(s, word, (size_t)len) == 0;
}

/* [v, end) with the XML entities (&amp; &lt; &gt; &quot; &apos; &#N; &#xN;) decoded
 * into out (MJ_PATH bytes); "" where it does not fit. */
static void xml_value(const char *v, const char *end, char *out) {
    static const char *const names[5] = {"amp;", "lt;", "gt;", "quot;", "apos;"};
    static const char chars[5] = {'&', '<', '>', '"', '\''};
    size_t n = 0;
    while (v < end) {
        unsigned long c = (unsigned char)*v++;
        if (c == '&') {
            int done = 0;
            for (int k = 0; k < 5 && !done; k++) {
                size_t l = strlen(names[k]);
                if ((size_t)(end - v) >= l && strncmp(v, names[k], l) == 0)
                    c = (unsigned char)chars[k], v += l, done = 1;
            }
            if (!done && v < end && *v == '#') {
                const char *q = v + 1;
                int hex = q < end && *q == 'x';
                char *stop;
                unsigned long code = strtoul(q + hex, &stop, hex ? 16 : 10);
                if (stop > q + hex && stop < end && *stop == ';' && code > 0 && code < 0x110000)
                    c = code, v = stop + 1;
            }
        }
        char utf8[4];
        int k = c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
        if (k == 1) utf8[0] = (char)c;
        for (int i = k - 1; k > 1 && i > 0; i--, c >>= 6) utf8[i] = (char)(0x80 | (c & 0x3F));
        if (k > 1) utf8[0] = (char)((0xF00u >> k) | c);
        if (n + (size_t)k >= MJ_PATH) {
            out[0] = '\0';
            return;
        }
        memcpy(out + n, utf8, (size_t)k);
        n += (size_t)k;
    }
    out[n] = '\0';
}

/* Calls fn for every attribute of every element of text, in order, until it returns
 * nonzero (then returns that); 0 at the end, or where the XML stops making sense
 * (MuJoCo's parser refuses what follows). */
static int xml_attributes(const char *text, int (*fn)(void *ctx, const XmlAttr *a), void *ctx) {
    static const char *const skip[4][2] = {{"<!--", "-->"}, {"<![CDATA[", "]]>"}, {"<?", "?>"}, {"<!", ">"}};
    XmlAttr *a = malloc(sizeof *a);
    NEVO_ASSERT(a != NULL);
    int r = 0;
    for (const char *p = strchr(text, '<'); p && !r; p = strchr(p, '<')) {
        int k = 0;
        while (k < 4 && strncmp(p, skip[k][0], strlen(skip[k][0])) != 0) k++;
        if (k < 4 || p[1] == '/') { /* skipped to its end; a closing tag's '>' */
            const char *e = strstr(p + 1, k < 4 ? skip[k][1] : ">");
            if (!e) break;
            p = e + 1;
            continue;
        }
        const char *q = ++p;
        while (*q && !xml_space(*q) && *q != '/' && *q != '>') q++;
        a->elem = p, a->elem_len = (int)(q - p);
        for (;;) {
            while (xml_space(*q)) q++;
            if (!*q || *q == '/' || *q == '>') break;
            const char *name = q;
            while (*q && !xml_space(*q) && *q != '=' && *q != '/' && *q != '>') q++;
            a->name = name, a->name_len = (int)(q - name);
            while (xml_space(*q)) q++;
            if (*q != '=') break;
            q++;
            while (xml_space(*q)) q++;
            if (*q != '"' && *q != '\'') break;
            const char *end = strchr(q + 1, *q);
            if (!end) {
                q = NULL;
                break;
            }
            xml_value(q + 1, end, a->value);
            q = end + 1;
            if ((r = fn(ctx, a)) != 0) break;
        }
        if (!q) break;
        p = q;
    }
    free(a);
    return r;
}

typedef struct ModelFiles {
    int n;
    char path[MJ_FILES][MJ_PATH];
    char *text[MJ_FILES];
    int open[MJ_FILES];         /* on the include chain being read */
    int n_dirs;
    char dir[MJ_DIRS][MJ_PATH]; /* the model's own, then any meshdir, texturedir, assetdir */
    /* the file being read and where the check stands */
    const char *name, *model, *reading, *own;
    int depth;
    NevoStatus st;
    NevoError *err;
} ModelFiles;

/* dir + "/" + v (v itself where absolute) into out; 0 where it does not fit. */
static int join(char *out, const char *dir, const char *v) {
    int w = *v == '/' ? snprintf(out, MJ_PATH, "%s", v) : snprintf(out, MJ_PATH, "%s/%s", dir, v);
    return w > 0 && w < MJ_PATH;
}

static NevoStatus read_model_file(ModelFiles *m, const char *path);

/* read_model_file's attributes: includes read in turn, asset directories gathered */
static int model_attr(void *ctx, const XmlAttr *a) {
    ModelFiles *m = ctx;
    char p[MJ_PATH];
    if (xml_is(a->elem, a->elem_len, "compiler") &&
        (xml_is(a->name, a->name_len, "meshdir") || xml_is(a->name, a->name_len, "texturedir") ||
         xml_is(a->name, a->name_len, "assetdir"))) {
        if (!join(p, m->dir[0], a->value)) return 0; /* MuJoCo's to refuse */
        for (int i = 0; i < m->n_dirs; i++)
            if (strcmp(m->dir[i], p) == 0) return 0;
        if (m->n_dirs == MJ_DIRS) {
            m->st = nevo_error(m->err, NEVO_ERR_INVALID, "%s: model %s names more than %d asset directories", m->name,
                               m->model, MJ_DIRS - 1);
            return 1;
        }
        snprintf(m->dir[m->n_dirs++], MJ_PATH, "%s", p);
    } else if (xml_is(a->elem, a->elem_len, "include") && xml_is(a->name, a->name_len, "file") && a->value[0]) {
        const char *dirs[2] = {m->dir[0], m->own}; /* beside the model or the file naming it */
        for (int d = 0; d < (strcmp(m->own, m->dir[0]) ? 2 : 1); d++) {
            struct stat sb;
            if (!join(p, dirs[d], a->value) || stat(p, &sb) != 0) continue;
            if (!S_ISREG(sb.st_mode))
                m->st = nevo_error(m->err, NEVO_ERR_IO, "%s: model %s: %s, named in %s, is not a regular file", m->name,
                                   m->model, p, m->reading);
            else
                m->st = read_model_file(m, p);
            if (m->st) return 1;
        }
    }
    return 0;
}

/* Reads model file `path` (a regular file, checked as it opens) and, in turn, the files
 * it includes, gathering the asset directories any of them names. */
static NevoStatus read_model_file(ModelFiles *m, const char *path) {
    for (int i = 0; i < m->n; i++)
        if (strcmp(m->path[i], path) == 0) {
            if (!m->open[i]) return NEVO_OK; /* read already, from another file */
            return nevo_error(m->err, NEVO_ERR_INVALID, "%s: model %s: %s includes itself", m->name, m->model, path);
        }
    if (m->depth > 8 || m->n == MJ_FILES) /* depth: this file's level of include */
        return nevo_error(m->err, NEVO_ERR_INVALID, "%s: model %s: includes nest more than 8 deep or number more "
                          "than %d files (at %s)", m->name, m->model, MJ_FILES - 1, path);
    uint8_t *data;
    size_t n;
    NevoStatus st = nevo_read_all(path, &data, &n, m->err);
    if (st) {
        char why[NEVO_ERROR_MSG_SIZE];
        snprintf(why, sizeof why, "%s", m->err ? m->err->msg : "");
        return nevo_error(m->err, st, "%s: model %s: %s", m->name, m->model, why);
    }
    int me = m->n++;
    snprintf(m->path[me], MJ_PATH, "%s", path);
    m->text[me] = malloc(n + 1);
    NEVO_ASSERT(m->text[me] != NULL);
    memcpy(m->text[me], data, n);
    m->text[me][n] = '\0'; /* a NUL inside ends the text, as it ends MuJoCo's */
    free(data);
    char own[MJ_PATH];
    nevo_path_dir(path, own, sizeof own);
    const char *reading = m->reading, *outer = m->own;
    m->reading = m->path[me], m->own = own, m->open[me] = 1, m->depth++;
    xml_attributes(m->text[me], model_attr, m);
    m->reading = reading, m->own = outer, m->open[me] = 0, m->depth--;
    return m->st;
}

/* named_files' attributes: every file, fileright, ... of any element */
static int named_attr(void *ctx, const XmlAttr *a) {
    ModelFiles *m = ctx;
    if (a->name_len < 4 || strncmp(a->name, "file", 4) != 0 || !a->value[0]) return 0;
    for (int d = -1; d < m->n_dirs; d++) {
        char p[MJ_PATH];
        struct stat sb;
        if (d >= 0 && strcmp(m->dir[d], m->own) == 0) continue; /* looked in already */
        if (!join(p, d < 0 ? m->own : m->dir[d], a->value) || stat(p, &sb) != 0) continue;
        if (!S_ISREG(sb.st_mode)) {
            m->st = nevo_error(m->err, NEVO_ERR_IO, "%s: model %s: %s, named in %s, is not a regular file", m->name,
                               m->model, p, m->reading);
            return 1;
        }
        if (a->value[0] == '/') break;
    }
    return 0;
}

/* The model files (itself and its includes) are read first, gathering the asset
 * directories any of them names (MuJoCo's compiler settings apply to the whole model);
 * then every file, fileright, ... of any element in them is looked for beside the
 * model, beside the file naming it and under each asset directory. Files that do not
 * exist are MuJoCo's to report. */
NevoStatus nevo_mj_check_named_files(const char *name, const char *model, NevoError *err) {
    ModelFiles *m = nevo_alloc(sizeof *m);
    nevo_path_dir(model, m->dir[m->n_dirs++], MJ_PATH);
    m->name = name, m->model = model, m->reading = model, m->own = m->dir[0], m->err = err;
    NevoStatus st = read_model_file(m, model);
    for (int f = 0; f < m->n && st == NEVO_OK; f++) {
        char own[MJ_PATH];
        nevo_path_dir(m->path[f], own, sizeof own);
        m->reading = m->path[f], m->own = own;
        xml_attributes(m->text[f], named_attr, m);
        st = m->st;
    }
    for (int f = 0; f < m->n; f++) free(m->text[f]);
    free(m);
    return st;
}

/* MuJoCo 2.2's compiler's stack size for a model that sets none: running out of stack
 * mid-step is a MuJoCo error (fatal), so a model may not set less than this. */
static long stack_estimate(const mjModel *m) {
    long rows = (long)m->njmax + m->neq + m->nv;
    long s = 5 * rows * rows + 20L * ((long)m->nq + m->nv + m->nu + m->na + m->nbody + m->njnt + m->ngeom +
                                     m->nsite + m->neq + m->ntendon + m->nwrap);
    return s > 1000 ? s : 1000;
}

/* Most stack one instance may have (128 MiB; every env slot has its own instance): nevo's
 * models need about 1.3M fields, and a failed mj_makeData is fatal in MuJoCo. */
#define MJ_MAX_STACK (1L << 24)

/* What the dimensions check cannot see: values a model file could set that make
 * MuJoCo abort or the simulation meaningless. */
static NevoStatus check_model_values(const char *name, const char *path, const mjModel *m, NevoError *err) {
    long need = stack_estimate(m);
    if (need > MJ_MAX_STACK || m->nstack > MJ_MAX_STACK)
        return nevo_error(err, NEVO_ERR_INVALID,
                          "%s: model %s needs a stack of %ld fields (nstack %d), more than the %ld allowed "
                          "(is njmax or nstack too large?)",
                          name, path, need, m->nstack, MJ_MAX_STACK);
    if (m->nstack < need)
        return nevo_error(err, NEVO_ERR_INVALID,
                          "%s: model %s sets nstack=%d, below the %ld MuJoCo estimates it needs; remove "
                          "<size nstack>",
                          name, path, m->nstack, need);
    if (!(m->opt.timestep > 0 && m->opt.timestep <= 1))
        return nevo_error(err, NEVO_ERR_INVALID, "%s: model %s has timestep %g; it must be in (0, 1] s", name,
                          path, m->opt.timestep);
    for (int b = 0; b < m->nbody; b++)
        if (!(m->body_mass[b] >= 0 && m->body_mass[b] < 1e9))
            return nevo_error(err, NEVO_ERR_INVALID, "%s: model %s: body %d has mass %g; it must be in [0, 1e9)",
                              name, path, b, m->body_mass[b]);
    for (int j = 0; j < m->nu; j++) {
        double lo = m->actuator_ctrlrange[2 * j], hi = m->actuator_ctrlrange[2 * j + 1];
        if (!(lo < hi && lo >= -1e6 && hi <= 1e6))
            return nevo_error(err, NEVO_ERR_INVALID,
                              "%s: model %s: actuator %d has ctrlrange [%g, %g]; it must be finite, within "
                              "+-1e6 and low < high",
                              name, path, j, lo, hi);
    }
    return NEVO_OK;
}

static NevoStatus apply_options(const MjRobot *robot, MjParams *p, const char *name,
                                const NevoEnvOption *opts, int n_opts, NevoError *err) {
    for (int i = 0; i < n_opts; i++) {
        const char *key = opts[i].key;
        double v = opts[i].value;
        if (strcmp(key, "frame_skip") == 0) {
            if (!(v >= 1 && v <= 1000 && v == floor(v)))
                return nevo_error(err, NEVO_ERR_INVALID,
                                  "%s: frame_skip must be a whole number in [1, 1000], got %g",
                                  name, v);
            p->frame_skip = (int)v;
        } else if (strcmp(key, "reset_noise_scale") == 0) {
            if (!(v >= 0 && isfinite(v)))
                return nevo_error(err, NEVO_ERR_INVALID,
                                  "%s: reset_noise_scale must be >= 0, got %g", name, v);
            p->reset_noise = v;
        } else if (strcmp(key, "terminate_when_unhealthy") == 0 && robot->has_health) {
            if (v != 0 && v != 1)
                return nevo_error(err, NEVO_ERR_INVALID,
                                  "%s: terminate_when_unhealthy must be true or false (1 or 0), "
                                  "got %g",
                                  name, v);
            p->terminate_when_unhealthy = v != 0;
        }
    }
    return NEVO_OK;
}

NevoStatus nevo_mj_configure(const MjRobot *robot, NevoEnvSpec *spec, void *params,
                             const NevoEnvOption *opts, int n_opts, NevoError *err) {
    MjParams *p = params;
    p->robot = robot;
    p->frame_skip = robot->frame_skip;
    p->reset_noise = robot->reset_noise;
    p->terminate_when_unhealthy = robot->has_health;
    NevoStatus st = apply_options(robot, p, spec->name, opts, n_opts, err);
    if (st != NEVO_OK) return st;
    st = find_model(spec->name, robot->model_file, p->path, sizeof p->path, err);
    if (st != NEVO_OK) return st;
    struct stat sb; /* mj_loadXML would wait on a FIFO */
    if (stat(p->path, &sb) != 0 || !S_ISREG(sb.st_mode))
        return nevo_error(err, NEVO_ERR_IO, "%s: model %s is not a regular file", spec->name, p->path);
    st = nevo_mj_check_named_files(spec->name, p->path, err);
    if (st != NEVO_OK) return st;

    char msg[1024] = "";
    pthread_mutex_lock(&load_lock);
    if (!mju_user_warning) mju_user_warning = on_warning;
    if (!mju_user_error) mju_user_error = on_error;
    p->model = mj_loadXML(p->path, NULL, msg, sizeof msg);
    pthread_mutex_unlock(&load_lock);
    if (!p->model)
        return nevo_error(err, NEVO_ERR_IO, "%s: cannot load model %s: %s", spec->name, p->path,
                          msg);

    const mjModel *m = p->model;
    if (m->nq != robot->nq || m->nv != robot->nv || m->nu != robot->nu ||
        m->nbody != robot->nbody)
        return nevo_error(err, NEVO_ERR_INVALID,
                          "%s: model %s has nq=%d nv=%d nu=%d nbody=%d; this env needs nq=%d "
                          "nv=%d nu=%d nbody=%d (is NEVO_MODELS pointing at nevo's models?)",
                          spec->name, p->path, m->nq, m->nv, m->nu, m->nbody, robot->nq,
                          robot->nv, robot->nu, robot->nbody);
    NevoStatus vst = check_model_values(spec->name, p->path, m, err);
    if (vst != NEVO_OK) return vst;
    p->dt = m->opt.timestep * p->frame_skip;
    p->total_mass = 0;
    for (int b = 0; b < m->nbody; b++) p->total_mass += m->body_mass[b];
    /* The action box is the actuators' control range (Gymnasium's action_space). */
    for (int j = 0; j < m->nu; j++) {
        spec->action_low[j] = (float)m->actuator_ctrlrange[2 * j];
        spec->action_high[j] = (float)m->actuator_ctrlrange[2 * j + 1];
    }
    return NEVO_OK;
}

void nevo_mj_release(void *params) {
    MjParams *p = params;
    if (p->model) mj_deleteModel(p->model);
    p->model = NULL;
}

static const MjParams *params_of(const NevoEnv *env) { return nevo_env_params(env); }

/* The forward coordinate whose change per dt is the robot's velocity reward. */
static double forward_x(const MjParams *p, const mjData *d) {
    switch (p->robot->forward) {
    case MJ_FORWARD_TORSO: return d->xpos[3 * 1 + 0];
    case MJ_FORWARD_COM: {
        double xy[2];
        nevo_mj_com(p, d, xy);
        return xy[0];
    }
    case MJ_FORWARD_ROOT_X: break;
    }
    return d->qpos[0];
}

/* Puts d at the model's rest state with everything derived from it computed. */
static void rest(const MjParams *p, MjState *s) {
    mj_resetData(p->model, s->d);
    mj_forward(p->model, s->d);
    s->ref_x = forward_x(p, s->d);
}

void nevo_mj_instance_free(const NevoEnv *env, void *state) {
    MjState *s = state;
    if (s->d) mj_deleteData(s->d);
    s->d = NULL;
}

/* The instance's simulation, created on its first use: in the thread that steps it (its
 * pages land near that core), only for slots that run, and never in a step after that. */
static mjData *data_of(const MjParams *p, MjState *s) {
    if (!s->d) {
        s->d = mj_makeData(p->model);
        rest(p, s);
    }
    return s->d;
}

void nevo_mj_reset_sim(const MjParams *p, mjData *d, uint64_t seed) {
    const mjModel *m = p->model;
    mj_resetData(m, d);
    NevoRng rng;
    nevo_rng_init(&rng, seed, NEVO_RNG_ENV, 0, 0, 0);
    double c = p->reset_noise;
    for (int i = 0; i < m->nq; i++) d->qpos[i] = m->qpos0[i] + (-c + 2 * c * nevo_rng_uniform(&rng));
    for (int i = 0; i < m->nv; i++)
        d->qvel[i] = p->robot->vel_noise == MJ_VEL_NORMAL ? c * nevo_rng_normal(&rng)
                                                          : -c + 2 * c * nevo_rng_uniform(&rng);
    mj_forward(m, d);
    if (p->robot->contact_forces_at_reset) mj_rnePostConstraint(m, d);
}

void nevo_mj_reset(const NevoEnv *env, void *state, uint64_t seed, float *obs) {
    const MjParams *p = params_of(env);
    MjState *s = state;
    mjData *d = data_of(p, s);
    nevo_mj_reset_sim(p, d, seed);
    s->ref_x = forward_x(p, d);
    p->robot->observe(p, d, obs);
}

void nevo_mj_step(const NevoEnv *env, void *state, const float *action, float *obs,
                  NevoStepResult *out) {
    const MjParams *p = params_of(env);
    const mjModel *m = p->model;
    MjState *s = state;
    mjData *d = data_of(p, s);
    for (int j = 0; j < m->nu; j++) d->ctrl[j] = action[j];
    for (int k = 0; k < p->frame_skip; k++) mj_step(m, d);
    /* contact forces (cfrc_ext) are only computed on request since MuJoCo 2.0 */
    mj_rnePostConstraint(m, d);
    double x = forward_x(p, d);
    double dx = x - s->ref_x;
    s->ref_x = x;
    bool terminated = false;
    out->reward = (float)p->robot->reward(p, d, action, dx, &terminated);
    out->terminated = terminated;
    p->robot->observe(p, d, obs);
}

void nevo_mj_get_state(const NevoEnv *env, const void *state, double *values) {
    const MjParams *p = params_of(env);
    const mjModel *m = p->model;
    const MjState *s = state;
    int nq = m->nq, nv = m->nv;
    if (!s->d) {
        /* never initialised: the rest state */
        memset(values, 0, sizeof(double) * (size_t)(nq + 2 * nv + 2));
        memcpy(values + 1, m->qpos0, sizeof(double) * (size_t)nq);
        return;
    }
    const mjData *d = s->d;
    values[0] = d->time;
    memcpy(values + 1, d->qpos, sizeof(double) * (size_t)nq);
    memcpy(values + 1 + nq, d->qvel, sizeof(double) * (size_t)nv);
    memcpy(values + 1 + nq + nv, d->qacc_warmstart, sizeof(double) * (size_t)nv);
    values[1 + nq + 2 * nv] = s->ref_x;
}

NevoStatus nevo_mj_set_state(const NevoEnv *env, void *state, const double *values, float *obs,
                             NevoError *err) {
    const MjParams *p = params_of(env);
    const mjModel *m = p->model;
    int nq = m->nq, nv = m->nv, n = nq + 2 * nv + 2;
    for (int i = 0; i < n; i++)
        if (!isfinite(values[i]))
            return nevo_error(err, NEVO_ERR_INVALID, "%s: state[%d] is %g, not finite",
                              nevo_env_spec(env)->name, i, values[i]);
    MjState *s = state;
    mjData *d = data_of(p, s);
    mj_resetData(m, d);
    d->time = values[0];
    memcpy(d->qpos, values + 1, sizeof(double) * (size_t)nq);
    memcpy(d->qvel, values + 1 + nq, sizeof(double) * (size_t)nv);
    mj_forward(m, d);
    mj_rnePostConstraint(m, d);
    /* after mj_forward: it overwrites the warm start with this state's solution */
    memcpy(d->qacc_warmstart, values + 1 + nq + nv, sizeof(double) * (size_t)nv);
    s->ref_x = values[1 + nq + 2 * nv];
    p->robot->observe(p, d, obs);
    return NEVO_OK;
}

void nevo_mj_bc(const NevoEnv *env, const void *state, float *bc) {
    const MjParams *p = params_of(env);
    const MjState *s = state;
    int n = nevo_env_spec(env)->bc_dim;
    if (!s->d) {
        for (int i = 0; i < n; i++) bc[i] = 0.0f;
        return;
    }
    if (p->robot->bc) {
        p->robot->bc(p, s->d, bc);
        return;
    }
    double xy[2];
    nevo_mj_com(p, s->d, xy);
    for (int i = 0; i < n && i < 2; i++) bc[i] = (float)xy[i];
}

float *nevo_mj_put(float *obs, const mjtNum *x, int n) {
    for (int i = 0; i < n; i++) obs[i] = (float)x[i];
    return obs + n;
}

float *nevo_mj_put_clipped(float *obs, const mjtNum *x, int n, double limit) {
    for (int i = 0; i < n; i++) {
        double v = x[i] < -limit ? -limit : x[i] > limit ? limit : x[i];
        obs[i] = (float)v;
    }
    return obs + n;
}

double nevo_mj_action_sq(const float *action, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)action[i] * action[i];
    return s;
}

void nevo_mj_com(const MjParams *p, const mjData *d, double xy[2]) {
    const mjModel *m = p->model;
    double sx = 0, sy = 0;
    for (int b = 0; b < m->nbody; b++) {
        sx += m->body_mass[b] * d->xipos[3 * b];
        sy += m->body_mass[b] * d->xipos[3 * b + 1];
    }
    xy[0] = sx / p->total_mass;
    xy[1] = sy / p->total_mass;
}

/* The class state sits at the end of the instance, after the env layer's header,
 * rounded up to 16 bytes (nevo_env_instance_size). */
static const MjState *state_of(const NevoEnv *env, const void *inst) {
    size_t body = (sizeof(MjState) + 15) / 16 * 16;
    return (const MjState *)((const char *)inst + nevo_env_instance_size(env) - body);
}

const mjModel *nevo_mj_model(const NevoEnv *env) { return params_of(env)->model; }

const mjData *nevo_mj_data(const NevoEnv *env, const void *inst) { return state_of(env, inst)->d; }

bool nevo_mj_healthy(const NevoEnv *env, const void *inst) {
    const MjParams *p = params_of(env);
    const mjData *d = state_of(env, inst)->d;
    return d && (!p->robot->healthy || p->robot->healthy(p, d));
}
