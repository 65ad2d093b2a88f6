/* Pictures of MuJoCo envs without a display: MuJoCo's own renderer (mjv_/mjr_) drawing
 * into an offscreen OpenGL context made with EGL on Mesa's surfaceless platform. On a
 * machine with no display and no GPU, Mesa runs OpenGL in software (llvmpipe); with a
 * GPU and its driver, the same code uses it.
 *
 * Where GL comes from: libmujoco 2.2 links no GL library. mjr_makeContext resolves its
 * GL functions (glad) through the GetProcAddress of the first platform library it finds
 * loaded in the process (libGL/libGLX, libEGL, libOSMesa). nevo dlopen()s libEGL.so.1
 * when the first picture is asked for, so nothing links against GL and every other
 * command runs on a machine without it; a missing library, display or driver makes
 * pictures fail (black frames and one message on stderr), never the run.
 *
 * One context per process, made on first use and kept (pictures are drawn one at a
 * time under a lock; the context is made current in the calling thread for each
 * picture and released after it). MuJoCo's scene and GPU-side model (mjvScene,
 * mjrContext) are rebuilt when a picture of a different model is asked for. The frame
 * is drawn from a private copy of the instance's mjData, so drawing never changes the
 * simulation.
 *
 * Camera: per robot, a free camera that follows the torso along the floor (x, y) at a
 * fixed height, seen from the side (azimuth 90: x to the right), as Gymnasium's
 * default views do; lines every metre on the floor show the motion the following
 * camera would otherwise hide. Background (depth at the far plane) is painted sky
 * blue. */
#include <EGL/egl.h>
#include <EGL/eglext.h>
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envs/mujoco_common.h"

#define W NEVO_MJ_RENDER_W
#define H NEVO_MJ_RENDER_H

/* How one robot is looked at. */
typedef struct View {
    const char *env;    /* registry name; NULL ends the table (the default view) */
    double distance;    /* metres from the look-at point */
    double elevation;   /* degrees; negative looks down */
    double lookat_z;    /* height of the look-at point */
    bool follow;        /* follow the torso in x and y (else look at the origin) */
    double ahead;       /* look this far ahead of the torso in x */
} View;

static const View views[] = {
    {"mujoco/hopper", 3.0, -20, 1.15, true, 0},
    {"mujoco/walker2d", 4.0, -20, 1.15, true, 0},
    {"mujoco/halfcheetah", 4.0, -20, 0.5, true, 0},
    {"mujoco/ant", 5.0, -30, 0.5, true, 0},
    {"mujoco/humanoid", 4.0, -20, 1.0, true, 0},
    /* the trap's U (its front wall at x = 5.4) in view from the start */
    {"mujoco/humanoid_trap", 8.0, -35, 0.5, true, 2.5},
    {"mujoco/swimmer", 4.0, -60, 0.0, true, 0},
    {"mujoco/invertedpendulum", 2.5, -10, 0.3, false, 0},
    {NULL, 4.0, -20, 0.5, true, 0},
};

static const View *view_of(const char *name) {
    const View *v = views;
    while (v->env && strcmp(v->env, name) != 0) v++;
    return v;
}

/* The EGL entry points nevo uses (resolved from libEGL.so.1 at run time). */
typedef struct Egl {
    PFNEGLGETPROCADDRESSPROC GetProcAddress;
    PFNEGLQUERYSTRINGPROC QueryString;
    PFNEGLGETDISPLAYPROC GetDisplay;
    PFNEGLINITIALIZEPROC Initialize;
    PFNEGLBINDAPIPROC BindAPI;
    PFNEGLCHOOSECONFIGPROC ChooseConfig;
    PFNEGLCREATECONTEXTPROC CreateContext;
    PFNEGLMAKECURRENTPROC MakeCurrent;
    PFNEGLGETERRORPROC GetError;
    PFNEGLDESTROYCONTEXTPROC DestroyContext;
    PFNEGLRELEASETHREADPROC ReleaseThread;
    PFNEGLGETPLATFORMDISPLAYEXTPROC GetPlatformDisplayEXT; /* NULL without the extension */
} Egl;

/* The numbers of glGetString, which is all nevo calls in GL itself. */
#define NEVO_GL_VERSION 0x1F02
#define NEVO_GL_EXTENSIONS 0x1F03
#define NEVO_GL_RENDERER 0x1F01
typedef const unsigned char *(*GetStringFn)(unsigned int name);

/* Model facts the GPU-side copy and the scratch mjData depend on: a model freed and
 * another loaded at the same address with other sizes is noticed. */
typedef struct ModelKey {
    const mjModel *m;
    int nq, nv, nu, nbody, ngeom, nmat, ntex, nmesh, nhfield, nskin, nstack, nbuffer;
} ModelKey;

static struct {
    pthread_mutex_t lock;
    int state;          /* 0 not tried, 1 ready, -1 failed */
    char why[512];      /* the failure, for the message and for tests */
    int warned;
    Egl egl;
    EGLDisplay dpy;
    EGLContext ctx;
    char renderer[128];
    /* MuJoCo's side, for the model last drawn */
    bool have_model;
    ModelKey key;       /* of the env's model */
    mjModel *model;     /* the renderer's copy of it */
    mjvScene scn;
    mjvOption opt;
    mjrContext con;
    mjData *scratch;
    float depth[W * H];
    uint8_t flipped[W * H * 3];
} R = {.lock = PTHREAD_MUTEX_INITIALIZER};

static bool fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static bool fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(R.why, sizeof R.why, fmt, ap);
    va_end(ap);
    return false;
}

static bool has_word(const char *list, const char *word) {
    size_t n = strlen(word);
    for (const char *p = list; p && (p = strstr(p, word)); p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0')) return true;
    return false;
}

/* Opens libEGL, finds a display (surfaceless first, then the default one), makes a
 * desktop-OpenGL context and checks it has what mjr_makeContext requires (OpenGL 1.5
 * and framebuffer objects; MuJoCo aborts the process otherwise). Leaves the context
 * current. */
static bool egl_start(void) {
    void *lib = dlopen("libEGL.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!lib)
        return fail("cannot load libEGL.so.1 (%s); install the Debian packages libegl1, "
                    "libegl-mesa0 and libgl1-mesa-dri",
                    dlerror());
    Egl *e = &R.egl;
#define SYM(field, name)                                                                  \
    if (!(*(void **)&e->field = dlsym(lib, name)))                                        \
        return fail("libEGL.so.1 has no %s", name);
    SYM(GetProcAddress, "eglGetProcAddress")
    SYM(QueryString, "eglQueryString")
    SYM(GetDisplay, "eglGetDisplay")
    SYM(Initialize, "eglInitialize")
    SYM(BindAPI, "eglBindAPI")
    SYM(ChooseConfig, "eglChooseConfig")
    SYM(CreateContext, "eglCreateContext")
    SYM(MakeCurrent, "eglMakeCurrent")
    SYM(GetError, "eglGetError")
    SYM(DestroyContext, "eglDestroyContext")
    SYM(ReleaseThread, "eglReleaseThread")
#undef SYM
    const char *client = e->QueryString(EGL_NO_DISPLAY, EGL_EXTENSIONS);
    if (has_word(client, "EGL_EXT_platform_base"))
        *(void **)&e->GetPlatformDisplayEXT = (void *)e->GetProcAddress("eglGetPlatformDisplayEXT");
    EGLint major = 0, minor = 0;
    R.dpy = EGL_NO_DISPLAY;
    if (e->GetPlatformDisplayEXT && has_word(client, "EGL_MESA_platform_surfaceless")) {
        R.dpy = e->GetPlatformDisplayEXT(EGL_PLATFORM_SURFACELESS_MESA, EGL_DEFAULT_DISPLAY, NULL);
        if (R.dpy != EGL_NO_DISPLAY && !e->Initialize(R.dpy, &major, &minor)) R.dpy = EGL_NO_DISPLAY;
    }
    if (R.dpy == EGL_NO_DISPLAY) {
        R.dpy = e->GetDisplay(EGL_DEFAULT_DISPLAY);
        if (R.dpy == EGL_NO_DISPLAY || !e->Initialize(R.dpy, &major, &minor))
            return fail("no EGL display: neither Mesa's surfaceless platform nor a default "
                        "display initialises (EGL error 0x%x); install libegl-mesa0 and "
                        "libgl1-mesa-dri",
                        (unsigned)e->GetError());
    }
    if (!e->BindAPI(EGL_OPENGL_API))
        return fail("EGL cannot bind desktop OpenGL (EGL error 0x%x)", (unsigned)e->GetError());
    EGLConfig cfg;
    EGLint n = 0;
    const EGLint surface_types[2] = {EGL_PBUFFER_BIT, EGL_DONT_CARE};
    for (int k = 0; k < 2 && n < 1; k++) {
        const EGLint attrs[] = {EGL_RED_SIZE,        8,
                                EGL_GREEN_SIZE,      8,
                                EGL_BLUE_SIZE,       8,
                                EGL_DEPTH_SIZE,      24,
                                EGL_RENDERABLE_TYPE, EGL_OPENGL_BIT,
                                EGL_SURFACE_TYPE,    surface_types[k],
                                EGL_NONE};
        if (!e->ChooseConfig(R.dpy, attrs, &cfg, 1, &n)) n = 0;
    }
    if (n < 1) return fail("EGL offers no OpenGL config with 8-bit RGB and a depth buffer");
    /* no attributes: a compatibility-profile context, which MuJoCo 2.2's renderer needs */
    R.ctx = e->CreateContext(R.dpy, cfg, EGL_NO_CONTEXT, NULL);
    if (R.ctx == EGL_NO_CONTEXT)
        return fail("EGL cannot create an OpenGL context (EGL error 0x%x)", (unsigned)e->GetError());
    if (!e->MakeCurrent(R.dpy, EGL_NO_SURFACE, EGL_NO_SURFACE, R.ctx))
        return fail("EGL cannot make a context current without a surface (EGL error 0x%x)",
                    (unsigned)e->GetError());
    GetStringFn get_string = (GetStringFn)e->GetProcAddress("glGetString");
    const char *version = get_string ? (const char *)get_string(NEVO_GL_VERSION) : NULL;
    const char *exts = get_string ? (const char *)get_string(NEVO_GL_EXTENSIONS) : NULL;
    const char *renderer = get_string ? (const char *)get_string(NEVO_GL_RENDERER) : NULL;
    int gl_major = 0, gl_minor = 0;
    int have_version = version && sscanf(version, "%d.%d", &gl_major, &gl_minor) == 2;
    if (!have_version || gl_major * 10 + gl_minor < 15 || !has_word(exts, "GL_ARB_framebuffer_object")) {
        /* unusable: release the context rather than leave it current on this thread */
        e->MakeCurrent(R.dpy, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
        e->DestroyContext(R.dpy, R.ctx);
        R.ctx = EGL_NO_CONTEXT;
        if (!have_version) return fail("the OpenGL context reports no version (%s)", version ? version : "null");
        return fail("OpenGL %s lacks what MuJoCo's renderer needs (1.5 and GL_ARB_framebuffer_object)", version);
    }
    snprintf(R.renderer, sizeof R.renderer, "%s", renderer ? renderer : "?");
    return true;
}

static ModelKey key_of(const mjModel *m) {
    ModelKey k = {m,          m->nq,   m->nv,      m->nu,    m->nbody, m->ngeom, m->nmat,
                  m->ntex,    m->nmesh, m->nhfield, m->nskin, m->nstack, m->nbuffer};
    return k;
}

static void drop_model(void) {
    if (!R.have_model) return;
    mjr_freeContext(&R.con);
    mjv_freeScene(&R.scn);
    mj_deleteData(R.scratch);
    mj_deleteModel(R.model);
    R.scratch = NULL;
    R.model = NULL;
    R.have_model = false;
}

/* Makes the scene and GPU-side model for m (the context is current). The renderer
 * draws from its own copy of the model, whose visual settings suit software GL: an
 * offscreen buffer of the picture's size, no multisampling and a 1024-texel shadow
 * map (MuJoCo's defaults, 640 x 480 with 4 samples and 4096 texels, take five times
 * longer in llvmpipe). */
static void use_model(const mjModel *m) {
    ModelKey k = key_of(m);
    if (R.have_model && memcmp(&k, &R.key, sizeof k) == 0) return;
    drop_model();
    R.model = mj_copyModel(NULL, m);
    R.model->vis.global.offwidth = W;
    R.model->vis.global.offheight = H;
    R.model->vis.quality.offsamples = 0;
    R.model->vis.quality.shadowsize = 1024;
    /* the models' lights (diffuse 1) plus MuJoCo's headlight wash the pale floor out to
     * white: dimmer lights keep its colour and the body's shading */
    for (int i = 0; i < 3 * R.model->nlight; i++) R.model->light_diffuse[i] *= 0.6f;
    for (int c = 0; c < 3; c++) {
        R.model->vis.headlight.ambient[c] = 0.25f;
        R.model->vis.headlight.diffuse[c] = 0.3f;
        R.model->vis.headlight.specular[c] = 0.1f;
    }
    mjv_defaultOption(&R.opt);
    mjv_defaultScene(&R.scn);
    mjv_makeScene(R.model, &R.scn, 1000);
    mjr_defaultContext(&R.con);
    mjr_makeContext(R.model, &R.con, mjFONTSCALE_50);
    mjr_setBuffer(mjFB_OFFSCREEN, &R.con);
    R.scratch = mj_makeData(R.model);
    R.key = k;
    R.have_model = true;
}

/* Thin dark strips on the floor every metre around (cx, cy), as decoration geoms. */
static void add_floor_lines(const mjModel *m, mjvScene *scn, double cx, double cy, double radius) {
    int plane = -1;
    for (int g = 0; g < m->ngeom && plane < 0; g++)
        if (m->geom_type[g] == mjGEOM_PLANE) plane = g;
    if (plane < 0) return;
    double z = m->geom_pos[3 * plane + 2] + 0.002;
    const float rgba[4] = {0.45f, 0.55f, 0.45f, 1.0f};
    const mjtNum mat[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
    for (int axis = 0; axis < 2; axis++) {
        double c = axis == 0 ? cx : cy;
        for (double v = floor(c - radius); v <= c + radius; v += 1.0) {
            if (scn->ngeom >= scn->maxgeom) return;
            mjtNum size[3] = {axis == 0 ? 0.015 : radius, axis == 0 ? radius : 0.015, 0.001};
            mjtNum pos[3] = {axis == 0 ? v : cx, axis == 0 ? cy : v, z};
            mjvGeom *g = scn->geoms + scn->ngeom++;
            mjv_initGeom(g, mjGEOM_BOX, size, pos, mat, rgba);
            g->category = mjCAT_DECOR;
        }
    }
}

/* At exit: MuJoCo's GPU-side model and the context go back to the driver, so that
 * leak checkers see that memory returned. The display stays initialised: terminating
 * it unloads Mesa's driver, whose remaining bookkeeping would then look leaked. */
static void stop(void) {
    pthread_mutex_lock(&R.lock);
    if (R.state == 1) {
        if (R.egl.MakeCurrent(R.dpy, EGL_NO_SURFACE, EGL_NO_SURFACE, R.ctx)) drop_model();
        R.egl.MakeCurrent(R.dpy, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
        R.egl.DestroyContext(R.dpy, R.ctx);
        R.egl.ReleaseThread();
        R.state = -1;
        snprintf(R.why, sizeof R.why, "the process is exiting");
    }
    pthread_mutex_unlock(&R.lock);
}

/* Starts the context on first use; true when pictures can be drawn. Under R.lock. */
static bool ready(void) {
    if (R.state == 0) {
        R.state = egl_start() ? 1 : -1;
        /* leave no context current in this thread: each picture binds it again */
        if (R.state == 1) {
            R.egl.MakeCurrent(R.dpy, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
            atexit(stop);
        }
    }
    return R.state == 1;
}

bool nevo_mj_render_available(char *why, size_t why_size) {
    pthread_mutex_lock(&R.lock);
    bool ok = ready();
    if (why && why_size) snprintf(why, why_size, "%s", ok ? R.renderer : R.why);
    pthread_mutex_unlock(&R.lock);
    return ok;
}

/* The sky behind everything (where depth is at the far plane): one flat colour, which
 * a GIF's palette keeps without banding. */
static const uint8_t sky[3] = {150, 190, 230};

void nevo_mj_render(const NevoEnv *env, const void *state, uint8_t *rgb) {
    const MjParams *p = nevo_env_params(env);
    const MjState *s = state;
    pthread_mutex_lock(&R.lock);
    if (!ready() || !R.egl.MakeCurrent(R.dpy, EGL_NO_SURFACE, EGL_NO_SURFACE, R.ctx)) {
        if (!R.warned++)
            fprintf(stderr, "nevo: cannot draw %s: %s\n", nevo_env_spec(env)->name,
                    R.state == 1 ? "EGL cannot make the context current" : R.why);
        memset(rgb, 0, (size_t)W * H * 3);
        pthread_mutex_unlock(&R.lock);
        return;
    }
    use_model(p->model);
    const mjModel *m = R.model;
    mjData *d = R.scratch;
    if (s->d) {
        mj_copyData(d, m, s->d);
    } else {
        /* never reset: the model's rest state */
        mj_resetData(m, d);
        mj_forward(m, d);
    }
    const View *v = view_of(nevo_env_spec(env)->name);
    mjvCamera cam;
    mjv_defaultCamera(&cam);
    cam.type = mjCAMERA_FREE;
    cam.distance = v->distance;
    cam.elevation = v->elevation;
    cam.azimuth = 90;
    cam.lookat[0] = (v->follow ? d->xpos[3 * 1 + 0] : 0) + v->ahead;
    cam.lookat[1] = v->follow ? d->xpos[3 * 1 + 1] : 0;
    cam.lookat[2] = v->lookat_z;
    mjv_updateScene(m, d, &R.opt, NULL, &cam, mjCAT_ALL, &R.scn);
    add_floor_lines(m, &R.scn, cam.lookat[0], cam.lookat[1], 1.5 * v->distance);
    /* the offscreen buffer is W x H unless GL gave less */
    int w = R.con.offWidth < W ? R.con.offWidth : W;
    int h = R.con.offHeight < H ? R.con.offHeight : H;
    mjrRect viewport = {0, 0, w, h};
    mjr_render(viewport, &R.scn, &R.con);
    memset(R.flipped, 0, sizeof R.flipped);
    mjr_readPixels(R.flipped, R.depth, viewport, &R.con);
    R.egl.MakeCurrent(R.dpy, EGL_NO_SURFACE, EGL_NO_SURFACE, EGL_NO_CONTEXT);
    /* GL's rows run bottom-up; ours top-down */
    memset(rgb, 0, (size_t)W * H * 3);
    for (int y = 0; y < h; y++) {
        const uint8_t *src = R.flipped + (size_t)(h - 1 - y) * w * 3;
        const float *z = R.depth + (size_t)(h - 1 - y) * w;
        uint8_t *dst = rgb + (size_t)y * W * 3;
        for (int x = 0; x < w; x++) {
            if (z[x] >= 1.0f) memcpy(dst + 3 * x, sky, 3);
            else memcpy(dst + 3 * x, src + 3 * x, 3);
        }
    }
    pthread_mutex_unlock(&R.lock);
}
